//go:build !cgo

package email

import (
	"crypto"
	"crypto/rsa"
)

// fastRSA returns k: without cgo there is no libcrypto to sign with.
func fastRSA(k *rsa.PrivateKey) crypto.Signer { return k }
