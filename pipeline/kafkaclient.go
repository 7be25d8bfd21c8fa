package pipeline

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"
)

// KafkaSecurity is how every Kafka client of the process (the producer, the
// runner's consumers, topic administration) authenticates to the brokers:
// TLS with an optional CA file and client certificate, and SASL PLAIN or
// SCRAM. The zero value is plaintext without SASL, as the embedded broker
// speaks.
type KafkaSecurity struct {
	TLS bool // connect with TLS (implied by any of the three files below)
	// CAFile is a PEM bundle of the CAs that sign the brokers' certificates;
	// empty uses the system roots.
	CAFile string
	// CertFile and KeyFile are a PEM client certificate and its key (mutual
	// TLS); both or neither.
	CertFile, KeyFile string
	// ServerName overrides the name checked in the brokers' certificates
	// (default: the host of the address dialled).
	ServerName string
	// SASLMechanism is "", "PLAIN", "SCRAM-SHA-256" or "SCRAM-SHA-512".
	SASLMechanism string
	SASLUsername  string
	SASLPassword  string
}

// Validate reports settings that cannot work.
func (s KafkaSecurity) Validate() error {
	if (s.CertFile == "") != (s.KeyFile == "") {
		return errors.New("kafka tls: a client certificate needs both a certificate file and a key file")
	}
	switch strings.ToUpper(s.SASLMechanism) {
	case "":
		if s.SASLUsername != "" || s.SASLPassword != "" {
			return errors.New("kafka sasl: username or password set without a mechanism")
		}
	case "PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512":
		if s.SASLUsername == "" {
			return fmt.Errorf("kafka sasl %s: no username", s.SASLMechanism)
		}
	default:
		return fmt.Errorf("kafka sasl: unknown mechanism %q (want PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512)", s.SASLMechanism)
	}
	return nil
}

// tlsOn reports whether connections use TLS.
func (s KafkaSecurity) tlsOn() bool {
	return s.TLS || s.CAFile != "" || s.CertFile != "" || s.KeyFile != ""
}

// Opts returns the kgo options that apply s: the one place every client's
// TLS and SASL settings are built. Files are read now.
func (s KafkaSecurity) Opts() ([]kgo.Opt, error) {
	if err := s.Validate(); err != nil {
		return nil, err
	}
	var opts []kgo.Opt
	if s.tlsOn() {
		tc := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: s.ServerName}
		if s.CAFile != "" {
			pem, err := os.ReadFile(s.CAFile)
			if err != nil {
				return nil, fmt.Errorf("kafka tls: read CA file: %w", err)
			}
			pool := x509.NewCertPool()
			if !pool.AppendCertsFromPEM(pem) {
				return nil, fmt.Errorf("kafka tls: no PEM certificate in CA file %s", s.CAFile)
			}
			tc.RootCAs = pool
		}
		if s.CertFile != "" {
			cert, err := tls.LoadX509KeyPair(s.CertFile, s.KeyFile)
			if err != nil {
				return nil, fmt.Errorf("kafka tls: load client certificate: %w", err)
			}
			tc.Certificates = []tls.Certificate{cert}
		}
		// kgo's DialTLSConfig sets ServerName per broker when it is empty.
		opts = append(opts, kgo.DialTLSConfig(tc))
	}
	if m := s.mechanism(); m != nil {
		opts = append(opts, kgo.SASL(m))
	}
	return opts, nil
}

// mechanism returns the SASL mechanism, nil without SASL.
func (s KafkaSecurity) mechanism() sasl.Mechanism {
	switch strings.ToUpper(s.SASLMechanism) {
	case "PLAIN":
		return plain.Auth{User: s.SASLUsername, Pass: s.SASLPassword}.AsMechanism()
	case "SCRAM-SHA-256":
		return scram.Auth{User: s.SASLUsername, Pass: s.SASLPassword}.AsSha256Mechanism()
	case "SCRAM-SHA-512":
		return scram.Auth{User: s.SASLUsername, Pass: s.SASLPassword}.AsSha512Mechanism()
	}
	return nil
}
