package contacts

import "sendstream/schemas"

// NormalizeEmail checks an address against the service's one email rule
// and returns its stored form: trimmed, lower-cased, the domain in its IDNA
// ASCII form, a non-ASCII local part NFC-normalised; invisible, control and
// bidi formatting characters and compatibility forms in the local part are
// refused. See schemas.NormalizeEmail, which this is, for the whole rule;
// the error's text completes "<field> …" in a 400 answer.
func NormalizeEmail(s string) (string, error) { return schemas.NormalizeEmail(s) }
