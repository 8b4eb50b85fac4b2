package awslocal

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// parseTOML reads the TOML subset Bottlerocket user data uses: [dotted.
// "quoted".tables], key = value with bare, quoted or dotted keys, and
// values that are basic or literal strings, integers, floats, booleans,
// single-line arrays and inline tables. Tables become map[string]any;
// integers are int64. The module carries no TOML library, and the
// settings Bottlerocket reads need no more than this.
func parseTOML(data []byte) (map[string]any, error) {
	root := map[string]any{}
	cur := root
	for n, raw := range strings.Split(string(data), "\n") {
		line := strings.TrimSpace(stripComment(raw))
		if line == "" {
			continue
		}
		lineErr := func(err error) error { return fmt.Errorf("TOML line %d: %w", n+1, err) }
		if strings.HasPrefix(line, "[[") {
			return nil, lineErr(errors.New("arrays of tables are not supported"))
		}
		if strings.HasPrefix(line, "[") {
			if !strings.HasSuffix(line, "]") {
				return nil, lineErr(errors.New("unterminated table header"))
			}
			keys, rest, err := parseKey(strings.TrimSpace(line[1 : len(line)-1]))
			if err != nil || strings.TrimSpace(rest) != "" {
				return nil, lineErr(fmt.Errorf("bad table header %q", line))
			}
			if cur, err = tableAt(root, keys); err != nil {
				return nil, lineErr(err)
			}
			continue
		}
		keys, rest, err := parseKey(line)
		if err != nil {
			return nil, lineErr(err)
		}
		rest = strings.TrimSpace(rest)
		if !strings.HasPrefix(rest, "=") {
			return nil, lineErr(fmt.Errorf("expected = after key in %q", line))
		}
		v, tail, err := parseValue(strings.TrimSpace(rest[1:]))
		if err != nil {
			return nil, lineErr(err)
		}
		if strings.TrimSpace(tail) != "" {
			return nil, lineErr(fmt.Errorf("unexpected %q after the value", tail))
		}
		t, err := tableAt(cur, keys[:len(keys)-1])
		if err != nil {
			return nil, lineErr(err)
		}
		if _, dup := t[keys[len(keys)-1]]; dup {
			return nil, lineErr(fmt.Errorf("key %q defined twice", keys[len(keys)-1]))
		}
		t[keys[len(keys)-1]] = v
	}
	return root, nil
}

// stripComment drops a # comment that is not inside a string.
func stripComment(s string) string {
	var quote byte
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case quote != 0 && c == '\\' && quote == '"':
			i++
		case quote != 0 && c == quote:
			quote = 0
		case quote == 0 && (c == '"' || c == '\''):
			quote = c
		case quote == 0 && c == '#':
			return s[:i]
		}
	}
	return s
}

func tableAt(root map[string]any, keys []string) (map[string]any, error) {
	t := root
	for _, k := range keys {
		next, ok := t[k]
		if !ok {
			m := map[string]any{}
			t[k] = m
			t = m
			continue
		}
		m, ok := next.(map[string]any)
		if !ok {
			return nil, fmt.Errorf("key %q is a value, not a table", k)
		}
		t = m
	}
	return t, nil
}

// parseKey reads a dotted key and returns what follows it.
func parseKey(s string) ([]string, string, error) {
	var keys []string
	for {
		s = strings.TrimLeft(s, " \t")
		if s == "" {
			return nil, "", errors.New("missing key")
		}
		var k string
		switch s[0] {
		case '"', '\'':
			v, rest, err := parseString(s)
			if err != nil {
				return nil, "", err
			}
			k, s = v, rest
		default:
			i := 0
			for i < len(s) && (isBare(s[i])) {
				i++
			}
			if i == 0 {
				return nil, "", fmt.Errorf("bad key at %q", s)
			}
			k, s = s[:i], s[i:]
		}
		keys = append(keys, k)
		t := strings.TrimLeft(s, " \t")
		if !strings.HasPrefix(t, ".") {
			return keys, s, nil
		}
		s = t[1:]
	}
}

func isBare(c byte) bool {
	return c == '-' || c == '_' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9')
}

func parseString(s string) (string, string, error) {
	if s[0] == '\'' {
		j := strings.IndexByte(s[1:], '\'')
		if j < 0 {
			return "", "", errors.New("unterminated literal string")
		}
		return s[1 : 1+j], s[2+j:], nil
	}
	var b strings.Builder
	for i := 1; i < len(s); i++ {
		switch c := s[i]; c {
		case '"':
			return b.String(), s[i+1:], nil
		case '\\':
			if i+1 >= len(s) {
				return "", "", errors.New("unterminated escape")
			}
			i++
			switch s[i] {
			case 'n':
				b.WriteByte('\n')
			case 't':
				b.WriteByte('\t')
			case 'r':
				b.WriteByte('\r')
			case '"', '\\':
				b.WriteByte(s[i])
			case 'u':
				if i+4 >= len(s) {
					return "", "", errors.New("short \\u escape")
				}
				r, err := strconv.ParseUint(s[i+1:i+5], 16, 32)
				if err != nil {
					return "", "", fmt.Errorf("bad \\u escape: %w", err)
				}
				b.WriteRune(rune(r))
				i += 4
			default:
				return "", "", fmt.Errorf("unknown escape \\%c", s[i])
			}
		default:
			b.WriteByte(c)
		}
	}
	return "", "", errors.New("unterminated string")
}

func parseValue(s string) (any, string, error) {
	if s == "" {
		return nil, "", errors.New("missing value")
	}
	switch s[0] {
	case '"', '\'':
		if strings.HasPrefix(s, `"""`) || strings.HasPrefix(s, "'''") {
			return nil, "", errors.New("multi-line strings are not supported")
		}
		return parseString(s)
	case '[':
		var out []any
		s = strings.TrimSpace(s[1:])
		for {
			if strings.HasPrefix(s, "]") {
				return out, s[1:], nil
			}
			v, rest, err := parseValue(s)
			if err != nil {
				return nil, "", err
			}
			out = append(out, v)
			s = strings.TrimSpace(rest)
			if strings.HasPrefix(s, ",") {
				s = strings.TrimSpace(s[1:])
			} else if !strings.HasPrefix(s, "]") {
				return nil, "", errors.New("unterminated array (arrays must be on one line)")
			}
		}
	case '{':
		out := map[string]any{}
		s = strings.TrimSpace(s[1:])
		for {
			if strings.HasPrefix(s, "}") {
				return out, s[1:], nil
			}
			keys, rest, err := parseKey(s)
			if err != nil {
				return nil, "", err
			}
			rest = strings.TrimSpace(rest)
			if !strings.HasPrefix(rest, "=") {
				return nil, "", errors.New("expected = in inline table")
			}
			v, rest, err := parseValue(strings.TrimSpace(rest[1:]))
			if err != nil {
				return nil, "", err
			}
			t, err := tableAt(out, keys[:len(keys)-1])
			if err != nil {
				return nil, "", err
			}
			t[keys[len(keys)-1]] = v
			s = strings.TrimSpace(rest)
			if strings.HasPrefix(s, ",") {
				s = strings.TrimSpace(s[1:])
			} else if !strings.HasPrefix(s, "}") {
				return nil, "", errors.New("unterminated inline table")
			}
		}
	}
	i := 0
	for i < len(s) && !strings.ContainsRune(",]} \t", rune(s[i])) {
		i++
	}
	word, rest := s[:i], s[i:]
	switch word {
	case "true":
		return true, rest, nil
	case "false":
		return false, rest, nil
	}
	clean := strings.ReplaceAll(word, "_", "")
	if n, err := strconv.ParseInt(clean, 10, 64); err == nil {
		return n, rest, nil
	}
	if f, err := strconv.ParseFloat(clean, 64); err == nil {
		return f, rest, nil
	}
	return nil, "", fmt.Errorf("unsupported value %q", word)
}
