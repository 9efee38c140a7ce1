package resolver

import (
	"fmt"
	"net/netip"
	"regexp"
	"strings"
)

// The flags' lists parsed into the policy's types: interface expressions, CIDR rules, prefixes.

// parseList parses each non-blank item of a comma-separated list (the policy's flag values).
func parseList[T any](s string, parse func(item string) (T, error)) ([]T, error) {
	var out []T
	for _, f := range strings.Split(s, ",") {
		if strings.TrimSpace(f) == "" {
			continue
		}
		v, err := parse(f)
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, nil
}

// ParseInterfaceRegexps parses a comma-separated list of Go regular expressions, each anchored to
// the whole interface name ("eth.*" matches eth0, not veth0).
func ParseInterfaceRegexps(s string) ([]*regexp.Regexp, error) {
	return parseList(s, func(f string) (*regexp.Regexp, error) {
		f = strings.TrimSpace(f)
		re, err := regexp.Compile(`^(?:` + f + `)$`)
		if err != nil {
			return nil, fmt.Errorf("%q is not a valid regular expression: %v", f, strings.TrimPrefix(err.Error(), "error parsing regexp: "))
		}
		return re, nil
	})
}

// MustInterfaceRegexps is ParseInterfaceRegexps for known-good expressions.
func MustInterfaceRegexps(exprs ...string) []*regexp.Regexp {
	res, err := ParseInterfaceRegexps(strings.Join(exprs, ","))
	if err != nil {
		panic(err)
	}
	return res
}

// ParseCIDRRules parses an ordered, comma-separated CIDR list; "!CIDR" is an exclusion.
func ParseCIDRRules(s string) ([]CIDRRule, error) {
	return parseList(s, func(f string) (CIDRRule, error) {
		f = strings.TrimSpace(f)
		r := CIDRRule{}
		if rest, ok := strings.CutPrefix(f, "!"); ok {
			r.Exclude, f = true, strings.TrimSpace(rest)
		}
		var err error
		r.Prefix, err = ParsePrefix(f)
		return r, err
	})
}

// ParsePrefix parses one CIDR and masks it ("10.1.2.3/8" means 10.0.0.0/8).
func ParsePrefix(s string) (netip.Prefix, error) {
	pfx, err := netip.ParsePrefix(strings.TrimSpace(s))
	if err != nil || pfx.Addr().Zone() != "" {
		return netip.Prefix{}, fmt.Errorf("%q is not a CIDR", s)
	}
	if pfx.Addr().Is4In6() {
		return netip.Prefix{}, fmt.Errorf("%q is an IPv4-mapped CIDR: write it as IPv4", s)
	}
	return pfx.Masked(), nil
}

// ParsePrefixes parses a comma-separated CIDR list.
func ParsePrefixes(s string) ([]netip.Prefix, error) { return parseList(s, ParsePrefix) }
