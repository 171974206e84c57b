package auth

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"regexp"
	"strconv"
	"strings"
	"unicode"

	"go.yaml.in/yaml/v3"

	"github.com/ternwal/tern/internal/units"
)

// fileError is what is wrong with an auth file, and where.
type fileError struct {
	path string // set by Load
	line int    // 1-based
	msg  string // says what is wrong and what to do
}

func (e *fileError) Error() string {
	var b strings.Builder
	b.WriteString("auth: ")
	if e.path != "" {
		b.WriteString(e.path + ": ")
	}
	if e.line > 0 {
		fmt.Fprintf(&b, "line %d: ", e.line)
	}
	b.WriteString(e.msg)
	return b.String()
}

func (e *fileError) Unwrap() error { return ErrBadFile }

func errAt(line int, format string, args ...any) error {
	return &fileError{line: max(line, 1), msg: fmt.Sprintf(format, args...)}
}

// Load reads and parses the auth file at path. Its errors are Parse's,
// prefixed by path, or the error of reading the file.
func Load(path string) (*Policy, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("auth: read the auth file: %w", err)
	}
	p, err := Parse(b)
	if fe, ok := errors.AsType[*fileError](err); ok {
		fe.path = path
	}
	return p, err
}

// Parse parses an auth file (docs/auth-file.md). Every error wraps
// ErrBadFile and names the line, what is wrong there and what to do. A
// policy it returns has at least one principal; unique names; for every
// principal a way to authenticate (token_hash, subject or san), none shared
// with another principal; no token on a node; grants of known permissions
// on explicit prefixes; and no negative quota.
func Parse(b []byte) (*Policy, error) {
	dec := yaml.NewDecoder(bytes.NewReader(b))
	var doc yaml.Node
	if err := dec.Decode(&doc); errors.Is(err, io.EOF) {
		return nil, errNoPrincipals(1)
	} else if err != nil {
		return nil, yamlError(err)
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); !errors.Is(err, io.EOF) {
		if err != nil {
			return nil, yamlError(err)
		}
		return nil, errAt(extra.Line, "a second YAML document starts here: an auth file is one document; merge the two, or remove this one")
	}
	return parseDoc(&doc)
}

var yamlLine = regexp.MustCompile(`^yaml: line (\d+): (.*)$`)

// yamlError is a syntax error of the YAML parser, with its line when it
// has one.
func yamlError(err error) error {
	if m := yamlLine.FindStringSubmatch(err.Error()); m != nil {
		line, _ := strconv.Atoi(m[1])
		return errAt(line, "not valid YAML: %s", m[2])
	}
	return &fileError{msg: "not valid YAML: " + strings.TrimPrefix(err.Error(), "yaml: ")}
}

func errNoPrincipals(line int) error {
	return errAt(line, "no principals: with --auth every call would be denied; add at least one principal with a name, a token_hash, subject or san, and grants (see docs/auth-file.md)")
}

var (
	topFields       = []string{"principals"}
	principalFields = []string{"name", "token_hash", "subject", "san", "node", "grants", "quotas"}
	grantFields     = []string{"prefix", "allow"}
	quotaFields     = []string{"append_bytes_per_second", "append_burst_bytes", "logs", "subscriptions"}
)

func parseDoc(doc *yaml.Node) (*Policy, error) {
	if len(doc.Content) == 0 {
		return nil, errNoPrincipals(doc.Line)
	}
	top := doc.Content[0]
	if top.Kind == yaml.ScalarNode && top.ShortTag() == "!!null" {
		return nil, errNoPrincipals(top.Line)
	}
	if top.Kind != yaml.MappingNode {
		return nil, errAt(top.Line, "an auth file is a mapping with one field, principals: a list of principals (see docs/auth-file.md)")
	}
	f, err := fields(top, "the auth file", topFields)
	if err != nil {
		return nil, err
	}
	list, ok := f["principals"]
	if !ok {
		return nil, errNoPrincipals(top.Line)
	}
	if err := notAlias(list, "principals"); err != nil {
		return nil, err
	}
	if list.Kind == yaml.ScalarNode && list.ShortTag() == "!!null" || list.Kind == yaml.SequenceNode && len(list.Content) == 0 {
		return nil, errNoPrincipals(list.Line)
	}
	if list.Kind != yaml.SequenceNode {
		return nil, errAt(list.Line, "principals is a list of principals, each a mapping that starts with \"- name: ...\"")
	}
	pol := &Policy{}
	seen := uniques{names: map[string]seenAt{}, tokens: map[string]seenAt{}, subjects: map[string]seenAt{}, sans: map[string]seenAt{}}
	for i, n := range list.Content {
		p, err := parsePrincipal(n, i, &seen)
		if err != nil {
			return nil, err
		}
		pol.Principals = append(pol.Principals, p)
	}
	return pol, nil
}

// seenAt is the principal that used a name, token, subject or SAN first.
type seenAt struct {
	name string
	line int
}

// uniques are the names and identities of the principals parsed so far.
type uniques struct {
	names, tokens, subjects, sans map[string]seenAt
}

// claim records that the principal named name, at line, uses key in m; it
// fails when another principal did first.
func claim(m map[string]seenAt, key, name string, line int, format string) error {
	if prev, ok := m[key]; ok {
		return errAt(line, format, name, prev.name, prev.line)
	}
	m[key] = seenAt{name, line}
	return nil
}

var tokenHashForm = regexp.MustCompile(`^sha256:[0-9a-f]{64}$`)

func parsePrincipal(n *yaml.Node, i int, seen *uniques) (*Principal, error) {
	ctx := fmt.Sprintf("principal #%d", i+1)
	if err := notAlias(n, ctx); err != nil {
		return nil, err
	}
	if n.Kind != yaml.MappingNode {
		return nil, errAt(n.Line, "%s is not a mapping: a principal has the fields %s", ctx, strings.Join(principalFields, ", "))
	}
	f, err := fields(n, ctx, principalFields)
	if err != nil {
		return nil, err
	}
	nameNode, ok := f["name"]
	if !ok {
		return nil, errAt(n.Line, "%s has no name: add \"name: ...\"; the name stands for the principal in audit logs and errors", ctx)
	}
	name, err := str(nameNode, ctx, "name")
	if err != nil {
		return nil, err
	}
	if name == "" || strings.IndexFunc(name, unicode.IsControl) >= 0 || strings.TrimSpace(name) != name {
		return nil, errAt(nameNode.Line, "%s: name %q is empty or has control characters or surrounding spaces: give a plain name, as audit logs will show it", ctx, name)
	}
	if err := claim(seen.names, name, name, nameNode.Line, "principal %q: name is also principal %q's (line %[3]d): names must be unique"); err != nil {
		return nil, err
	}
	ctx = fmt.Sprintf("principal %q", name)
	p := &Principal{Name: name}

	if v, ok := f["token_hash"]; ok {
		if p.TokenHash, err = str(v, ctx, "token_hash"); err != nil {
			return nil, err
		}
		// The value is not echoed: it may be a token pasted by mistake.
		if !tokenHashForm.MatchString(p.TokenHash) {
			return nil, errAt(v.Line, "%s: token_hash is not \"sha256:\" and 64 lowercase hex digits: put there what \"tern auth hash-token\" printed for the token, never the token itself", ctx)
		}
		if err := claim(seen.tokens, p.TokenHash, name, v.Line, "principal %q: token_hash is also principal %q's (line %[3]d): each principal needs its own token (tern auth new-token)"); err != nil {
			return nil, err
		}
	}
	for _, id := range []struct {
		field string
		to    *string
		m     map[string]seenAt
	}{{"subject", &p.Subject, seen.subjects}, {"san", &p.SAN, seen.sans}} {
		v, ok := f[id.field]
		if !ok {
			continue
		}
		if *id.to, err = str(v, ctx, id.field); err != nil {
			return nil, err
		}
		if *id.to == "" {
			return nil, errAt(v.Line, "%s: %s is empty: give the certificate's %[2]s, or remove the field", ctx, id.field)
		}
		if err := claim(id.m, *id.to, name, v.Line, "principal %q: "+id.field+" is also principal %q's (line %[3]d): a certificate must name one principal"); err != nil {
			return nil, err
		}
	}
	if v, ok := f["node"]; ok {
		if p.Node, err = boolean(v, ctx, "node"); err != nil {
			return nil, err
		}
	}
	if p.TokenHash == "" && p.Subject == "" && p.SAN == "" {
		return nil, errAt(n.Line, "%s has no way to authenticate: give it a token_hash (from tern auth new-token or hash-token), or the subject or a san of its client certificate", ctx)
	}
	if p.Node && p.TokenHash != "" {
		return nil, errAt(f["token_hash"].Line, "%s: a node cannot have a token_hash: nodes are certificate identities; give the subject or san of the node's certificate and remove token_hash", ctx)
	}
	if v, ok := f["grants"]; ok {
		if p.Grants, err = parseGrants(v, ctx); err != nil {
			return nil, err
		}
	}
	if v, ok := f["quotas"]; ok {
		if p.Quotas, err = parseQuotas(v, ctx); err != nil {
			return nil, err
		}
	}
	return p, nil
}

func parseGrants(list *yaml.Node, ctx string) ([]Grant, error) {
	if err := notAlias(list, ctx); err != nil {
		return nil, err
	}
	if list.Kind == yaml.ScalarNode && list.ShortTag() == "!!null" {
		return nil, nil
	}
	if list.Kind != yaml.SequenceNode {
		return nil, errAt(list.Line, "%s: grants is a list of {prefix: ..., allow: [...]}", ctx)
	}
	var grants []Grant
	for _, n := range list.Content {
		if err := notAlias(n, ctx); err != nil {
			return nil, err
		}
		if n.Kind != yaml.MappingNode {
			return nil, errAt(n.Line, "%s: a grant is a mapping {prefix: ..., allow: [...]}", ctx)
		}
		f, err := fields(n, ctx+": grant", grantFields)
		if err != nil {
			return nil, err
		}
		var g Grant
		v, ok := f["prefix"]
		if !ok {
			return nil, errAt(n.Line, "%s: a grant without a prefix: write prefix: \"\" to grant on every log", ctx)
		}
		if g.Prefix, err = str(v, ctx, "prefix"); err != nil {
			return nil, err
		}
		allow, ok := f["allow"]
		if !ok {
			return nil, errAt(n.Line, "%s: the grant of prefix %q has no allow: list its permissions, allow: [read, append, subscribe, admin]", ctx, g.Prefix)
		}
		if err := notAlias(allow, ctx); err != nil {
			return nil, err
		}
		if allow.Kind != yaml.SequenceNode || len(allow.Content) == 0 {
			return nil, errAt(allow.Line, "%s: allow is a list of one or more permissions: allow: [read, append, subscribe, admin]", ctx)
		}
		for _, pn := range allow.Content {
			if err := notAlias(pn, ctx); err != nil {
				return nil, err
			}
			if pn.Kind != yaml.ScalarNode {
				return nil, errAt(pn.Line, "%s: allow lists permissions: read, append, subscribe or admin", ctx)
			}
			perm := Permission(pn.Value)
			if !perm.valid() {
				return nil, errAt(pn.Line, "%s: allow %q is not a permission: use read, append, subscribe or admin", ctx, pn.Value)
			}
			g.Allow = append(g.Allow, perm)
		}
		grants = append(grants, g)
	}
	return grants, nil
}

func (p Permission) valid() bool {
	switch p {
	case Read, Append, Subscribe, Admin:
		return true
	}
	return false
}

func parseQuotas(n *yaml.Node, ctx string) (Quotas, error) {
	var q Quotas
	if err := notAlias(n, ctx); err != nil {
		return q, err
	}
	if n.Kind != yaml.MappingNode {
		return q, errAt(n.Line, "%s: quotas is a mapping of %s", ctx, strings.Join(quotaFields, ", "))
	}
	f, err := fields(n, ctx+": quotas", quotaFields)
	if err != nil {
		return q, err
	}
	sizes := []struct {
		field string
		to    *int64
	}{{"append_bytes_per_second", &q.AppendBytesPerSecond}, {"append_burst_bytes", &q.AppendBurstBytes}}
	for _, s := range sizes {
		v, ok := f[s.field]
		if !ok {
			continue
		}
		text, err := quotaText(v, ctx, s.field)
		if err != nil {
			return q, err
		}
		if *s.to, err = units.ParseBytes(text); err != nil {
			return q, errAt(v.Line, "%s: %s: %v", ctx, s.field, err)
		}
	}
	counts := []struct {
		field string
		to    *int
	}{{"logs", &q.Logs}, {"subscriptions", &q.Subscriptions}}
	for _, c := range counts {
		v, ok := f[c.field]
		if !ok {
			continue
		}
		text, err := quotaText(v, ctx, c.field)
		if err != nil {
			return q, err
		}
		if *c.to, err = strconv.Atoi(text); err != nil {
			return q, errAt(v.Line, "%s: %s %q is not a whole number", ctx, c.field, text)
		}
	}
	if q.AppendBurstBytes > 0 && q.AppendBytesPerSecond == 0 {
		return q, errAt(f["append_burst_bytes"].Line, "%s: append_burst_bytes without append_bytes_per_second: a burst bounds nothing without a rate; set the rate too, or remove the burst", ctx)
	}
	return q, nil
}

// quotaText is the text of a quota's value, refused when negative.
func quotaText(v *yaml.Node, ctx, field string) (string, error) {
	text, err := str(v, ctx, field)
	if err != nil {
		return "", err
	}
	text = strings.TrimSpace(text)
	if strings.HasPrefix(text, "-") {
		return "", errAt(v.Line, "%s: %s %q is negative: a quota is a bound of zero or more; 0, or no field, is no bound", ctx, field, text)
	}
	return text, nil
}

// fields checks that the mapping n has only the known fields, each once,
// and returns their values by name. what names the mapping in errors.
func fields(n *yaml.Node, what string, known []string) (map[string]*yaml.Node, error) {
	f := make(map[string]*yaml.Node, len(n.Content)/2)
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		if k.Kind != yaml.ScalarNode {
			return nil, errAt(k.Line, "%s: a field's name must be a plain word, one of %s", what, strings.Join(known, ", "))
		}
		isKnown := false
		for _, name := range known {
			isKnown = isKnown || name == k.Value
		}
		if !isKnown {
			return nil, errAt(k.Line, "%s: unknown field %q: the fields are %s", what, k.Value, strings.Join(known, ", "))
		}
		if prev, ok := f[k.Value]; ok {
			return nil, errAt(k.Line, "%s: field %q given twice (first on line %d): keep one", what, k.Value, prev.Line)
		}
		f[k.Value] = v
	}
	return f, nil
}

// notAlias refuses a YAML alias (*name): walking one could expand the file
// exponentially, and an auth file is short enough to write out.
func notAlias(n *yaml.Node, what string) error {
	if n.Kind == yaml.AliasNode {
		return errAt(n.Line, "%s: YAML aliases (*%s) are not supported in an auth file: write the value out", what, n.Value)
	}
	return nil
}

// str is the text of a scalar field.
func str(n *yaml.Node, ctx, field string) (string, error) {
	if err := notAlias(n, ctx); err != nil {
		return "", err
	}
	switch {
	case n.Kind != yaml.ScalarNode:
		return "", errAt(n.Line, "%s: %s must be a single value, not a list or a mapping", ctx, field)
	case n.ShortTag() == "!!null":
		return "", errAt(n.Line, "%s: %s has no value: give one, or remove the field (an empty string is written \"\")", ctx, field)
	case n.Style&yaml.TaggedStyle != 0 && n.ShortTag() != "!!str":
		return "", errAt(n.Line, "%s: %s has the YAML tag %s: write a plain value", ctx, field, n.Tag)
	}
	return n.Value, nil
}

func boolean(n *yaml.Node, ctx, field string) (bool, error) {
	if err := notAlias(n, ctx); err != nil {
		return false, err
	}
	if n.Kind == yaml.ScalarNode && n.ShortTag() == "!!bool" {
		var b bool
		if err := n.Decode(&b); err == nil {
			return b, nil
		}
	}
	return false, errAt(n.Line, "%s: %s must be true or false", ctx, field)
}
