//go:build cgo

package email

/*
#cgo LDFLAGS: -lcrypto
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/rsa.h>
#include <openssl/x509.h>

// ss_rsa_key reads a PKCS#1 DER RSA private key; NULL when it does not parse.
static EVP_PKEY *ss_rsa_key(const unsigned char *der, long n) {
	const unsigned char *p = der;
	EVP_PKEY *k = d2i_PrivateKey(EVP_PKEY_RSA, NULL, &p, n);
	if (k == NULL) {
		ERR_clear_error(); // the queue is per thread, and Go reuses threads
	}
	return k;
}

// ss_rsa_sign signs a SHA-256 digest with PKCS #1 v1.5 padding into sig
// (*siglen bytes of room; set to the signature's length). 1 on success.
static int ss_rsa_sign(EVP_PKEY *k, const unsigned char *digest, size_t n, unsigned char *sig, size_t *siglen) {
	EVP_PKEY_CTX *ctx = EVP_PKEY_CTX_new(k, NULL);
	if (ctx == NULL) {
		ERR_clear_error();
		return 0;
	}
	int ok = EVP_PKEY_sign_init(ctx) > 0
		&& EVP_PKEY_CTX_set_rsa_padding(ctx, RSA_PKCS1_PADDING) > 0
		&& EVP_PKEY_CTX_set_signature_md(ctx, EVP_sha256()) > 0
		&& EVP_PKEY_sign(ctx, sig, siglen, digest, n) > 0;
	EVP_PKEY_CTX_free(ctx);
	if (!ok) {
		ERR_clear_error();
	}
	return ok;
}
*/
import "C"

import (
	"crypto"
	"crypto/rsa"
	"crypto/x509"
	"errors"
	"io"
	"runtime"
	"unsafe"
)

// rsaSigner signs with OpenSSL's libcrypto, whose RSA-2048 private-key
// operation is constant-time and blinded like Go's and about four times
// faster on these machines (0.33 ms against 1.3 ms a signature). It
// signs SHA-256 digests with PKCS #1 v1.5 padding, the only kind DKIM
// rsa-sha256 asks for, and hands any other request to the Go key.
type rsaSigner struct {
	key  *rsa.PrivateKey
	pkey *C.EVP_PKEY
}

// fastRSA returns a signer for k backed by libcrypto, or k itself when
// libcrypto refuses the key.
func fastRSA(k *rsa.PrivateKey) crypto.Signer {
	der := x509.MarshalPKCS1PrivateKey(k)
	pkey := C.ss_rsa_key((*C.uchar)(unsafe.Pointer(&der[0])), C.long(len(der)))
	clear(der) // a copy of the private key
	if pkey == nil {
		return k
	}
	s := &rsaSigner{key: k, pkey: pkey}
	runtime.AddCleanup(s, func(p *C.EVP_PKEY) { C.EVP_PKEY_free(p) }, pkey)
	return s
}

// Public returns the key's public half (*rsa.PublicKey).
func (s *rsaSigner) Public() crypto.PublicKey { return s.key.Public() }

// Sign signs digest, a SHA-256 hash, with PKCS #1 v1.5 padding; other
// hashes and PSS go to crypto/rsa. rand is not used by libcrypto, which
// draws its own blinding values.
func (s *rsaSigner) Sign(rand io.Reader, digest []byte, opts crypto.SignerOpts) ([]byte, error) {
	if _, pss := opts.(*rsa.PSSOptions); pss || opts.HashFunc() != crypto.SHA256 || len(digest) != 32 {
		return s.key.Sign(rand, digest, opts)
	}
	sig := make([]byte, s.key.Size())
	n := C.size_t(len(sig))
	ok := C.ss_rsa_sign(s.pkey, (*C.uchar)(unsafe.Pointer(&digest[0])), C.size_t(len(digest)),
		(*C.uchar)(unsafe.Pointer(&sig[0])), &n)
	runtime.KeepAlive(s)
	if ok != 1 || int(n) != len(sig) {
		return nil, errors.New("dkim: libcrypto could not sign")
	}
	return sig, nil
}
