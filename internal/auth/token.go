package auth

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// MinTokenBytes is the shortest token HashToken accepts. NewToken's are 32
// bytes of randomness, 43 characters.
const MinTokenBytes = 16

// tokenHashPrefix names the hash function of a token_hash.
const tokenHashPrefix = "sha256:"

// HashToken is the token_hash of token for an auth file: "sha256:" and the
// SHA-256 of its bytes in lowercase hex. It refuses a token shorter than
// MinTokenBytes or with whitespace or control characters: such a token is
// typed or chosen by a person, not the random secret a fast hash may
// protect.
func HashToken(token string) (string, error) {
	if err := checkToken(token); err != nil {
		return "", err
	}
	return hashToken(token), nil
}

func hashToken(token string) string {
	sum := sha256.Sum256([]byte(token))
	return tokenHashPrefix + hex.EncodeToString(sum[:])
}

// checkToken says why token is not a token HashToken accepts; its messages
// do not show the token.
func checkToken(token string) error {
	if len(token) < MinTokenBytes {
		return fmt.Errorf("auth: the token is %d bytes, fewer than %d: tokens are random secrets; make one with \"tern auth new-token\"", len(token), MinTokenBytes)
	}
	if i := strings.IndexFunc(token, func(r rune) bool {
		return r == utf8.RuneError || unicode.IsSpace(r) || unicode.IsControl(r)
	}); i >= 0 {
		return fmt.Errorf("auth: the token has whitespace, a control character or invalid UTF-8 at byte %d: tokens are random secrets; make one with \"tern auth new-token\"", i)
	}
	return nil
}

// NewToken is a new random token: 32 bytes from crypto/rand in unpadded
// base64url (43 characters, safe in a header, a shell and YAML).
func NewToken() (string, error) {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("auth: read random bytes: %w", err)
	}
	return base64.RawURLEncoding.EncodeToString(b), nil
}

// ByToken is the principal whose token_hash is token's hash. A token that
// HashToken refuses matches no one, whatever the file holds. The token is
// hashed once and its hash compared with every principal's in constant
// time, without stopping at a match, so the time taken does not tell which
// hash, or how much of one, matched.
func (p *Policy) ByToken(token string) (*Principal, bool) {
	if p == nil || checkToken(token) != nil {
		return nil, false
	}
	sum := sha256.Sum256([]byte(token))
	var found *Principal
	for _, pr := range p.Principals {
		var want [sha256.Size]byte
		h, ok := strings.CutPrefix(pr.TokenHash, tokenHashPrefix)
		if n, err := hex.Decode(want[:], []byte(h)); !ok || err != nil || n != len(want) {
			continue // no token (or not a hash, if p was not made by Parse)
		}
		if subtle.ConstantTimeCompare(sum[:], want[:]) == 1 && found == nil {
			found = pr
		}
	}
	return found, found != nil
}

// ByCert is the principal a verified client certificate identifies: the
// first in the file whose Subject is c.Subject.String(), or else the first
// whose SAN is one of c's DNS names, IP addresses (as net.IP.String prints
// them), email addresses or URIs (as url.URL.String prints them). The
// comparisons are exact. ByCert does not verify c: the TLS handshake has.
func (p *Policy) ByCert(c *x509.Certificate) (*Principal, bool) {
	if p == nil || c == nil {
		return nil, false
	}
	subject := c.Subject.String()
	for _, pr := range p.Principals {
		if pr.Subject != "" && pr.Subject == subject {
			return pr, true
		}
	}
	var sans []string
	sans = append(sans, c.DNSNames...)
	sans = append(sans, c.EmailAddresses...)
	for _, ip := range c.IPAddresses {
		sans = append(sans, ip.String())
	}
	for _, u := range c.URIs {
		sans = append(sans, u.String())
	}
	for _, pr := range p.Principals {
		for _, san := range sans {
			if pr.SAN != "" && pr.SAN == san {
				return pr, true
			}
		}
	}
	return nil, false
}
