package contacts

import (
	"errors"
	"net/mail"
	"strings"
)

// errBadEmail is returned for anything that is not a plain address.
var errBadEmail = errors.New("must be a valid email address")

// NormalizeEmail trims and lower-cases an address (spec general fact 2) and
// checks that it is a plain addr-spec: no display name or angle brackets, at
// most 254 characters, a local part of at most 64, and a domain of at least
// two dot-separated labels of letters, digits and hyphens.
func NormalizeEmail(s string) (string, error) {
	e := strings.ToLower(strings.TrimSpace(s))
	if e == "" || len(e) > 254 {
		return "", errBadEmail
	}
	a, err := mail.ParseAddress(e)
	if err != nil || a.Address != e || a.Name != "" {
		return "", errBadEmail
	}
	at := strings.LastIndexByte(e, '@')
	if at < 1 || at > 64 || strings.ContainsAny(e[:at], " \"\\") {
		return "", errBadEmail
	}
	if !validDomain(e[at+1:]) {
		return "", errBadEmail
	}
	return e, nil
}

// validDomain accepts host names of two or more labels (1-63 characters of
// letters, digits and inner hyphens each).
func validDomain(d string) bool {
	labels := strings.Split(d, ".")
	if len(labels) < 2 || len(d) > 253 {
		return false
	}
	for _, l := range labels {
		if l == "" || len(l) > 63 || l[0] == '-' || l[len(l)-1] == '-' {
			return false
		}
		for i := 0; i < len(l); i++ {
			c := l[i]
			if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c >= 0x80) {
				return false
			}
		}
	}
	return true
}
