package main

import (
	"fmt"
	"os"
	"strings"

	"sendstream/pipeline"
)

// kafkaSecurity reads the Kafka TLS and SASL settings:
//
//   - SENDSTREAM_KAFKA_TLS=1 connects with TLS (implied by any of the files);
//   - SENDSTREAM_KAFKA_TLS_CA_FILE: PEM CAs of the brokers' certificates
//     (default: the system roots);
//   - SENDSTREAM_KAFKA_TLS_CERT_FILE and SENDSTREAM_KAFKA_TLS_KEY_FILE: a
//     PEM client certificate and key (both or neither);
//   - SENDSTREAM_KAFKA_SASL_MECHANISM: PLAIN, SCRAM-SHA-256 or
//     SCRAM-SHA-512, with SENDSTREAM_KAFKA_SASL_USERNAME and
//     SENDSTREAM_KAFKA_SASL_PASSWORD.
//
// Files are checked for readability here, so a typo fails at start-up.
func kafkaSecurity() (pipeline.KafkaSecurity, error) {
	s := pipeline.KafkaSecurity{
		CAFile:        os.Getenv("SENDSTREAM_KAFKA_TLS_CA_FILE"),
		CertFile:      os.Getenv("SENDSTREAM_KAFKA_TLS_CERT_FILE"),
		KeyFile:       os.Getenv("SENDSTREAM_KAFKA_TLS_KEY_FILE"),
		SASLMechanism: strings.ToUpper(os.Getenv("SENDSTREAM_KAFKA_SASL_MECHANISM")),
		SASLUsername:  os.Getenv("SENDSTREAM_KAFKA_SASL_USERNAME"),
		SASLPassword:  os.Getenv("SENDSTREAM_KAFKA_SASL_PASSWORD"),
	}
	switch v := os.Getenv("SENDSTREAM_KAFKA_TLS"); strings.ToLower(v) {
	case "", "0", "false", "no", "off":
	case "1", "true", "yes", "on":
		s.TLS = true
	default:
		return s, fmt.Errorf("SENDSTREAM_KAFKA_TLS %q: want 1 or 0", v)
	}
	if _, err := s.Opts(); err != nil { // validates and reads the files
		return s, fmt.Errorf("SENDSTREAM_KAFKA_*: %w", err)
	}
	return s, nil
}
