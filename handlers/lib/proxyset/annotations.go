package proxyset

import (
	"fmt"
	"slices"
	"strings"

	"tailscale.com/util/dnsname"

	"github.com/tailplane/tailplane/handlers/lib/settings"
	"github.com/tailplane/tailplane/internal/proxystate"
)

// Tags returns the proxy's ACL tags: the tailscale.com/tags annotation
// (comma-separated, each checked with tailcfg.CheckTag) or, without it, the
// defaults. The error names every invalid tag, in the official operator's
// words ("invalid tag %q: ...").
func Tags(annotations map[string]string, defaults []string) ([]string, error) {
	v, ok := annotations[proxystate.AnnotationTags]
	if !ok {
		return defaults, nil
	}
	tags, err := settings.ParseTags(v)
	if err != nil {
		return nil, fmt.Errorf("annotation %s: %w", proxystate.AnnotationTags, err)
	}
	return tags, nil
}

// ProxyClassName returns the ProxyClass a Service or Ingress asks for: the
// tailscale.com/proxy-class label, else the annotation of the same name,
// else the default (PROXY_DEFAULT_CLASS). Set but empty counts as set.
func ProxyClassName(labels, annotations map[string]string, def string) string {
	if v, ok := labels[proxystate.LabelAnnotationProxyCls]; ok {
		return v
	}
	if v, ok := annotations[proxystate.LabelAnnotationProxyCls]; ok {
		return v
	}
	return def
}

// HostnameRule is the rule of tailnet hostnames, as error messages state it.
const HostnameRule = "a hostname is one DNS label: 1 to 63 letters, digits or hyphens, starting and ending with a letter or digit"

// ValidHostname checks a tailnet hostname (one DNS label, at most 63
// characters) with the same rules as the official operator. The error
// quotes the whole value, states the rule and lists every violation (the
// official message names only the first one found).
func ValidHostname(h string) error {
	if dnsname.ValidLabel(h) == nil {
		return nil
	}
	var why []string
	switch {
	case h == "":
		why = append(why, "it is empty")
	case len(h) > 63:
		why = append(why, fmt.Sprintf("it is %d characters long", len(h)))
	}
	var bad []string
	for _, r := range h {
		ok := r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-'
		if q := fmt.Sprintf("%q", r); !ok && !slices.Contains(bad, q) {
			bad = append(bad, q)
		}
	}
	if len(bad) > 0 {
		why = append(why, "it contains "+strings.Join(bad, ", "))
	}
	if strings.HasPrefix(h, "-") {
		why = append(why, "it starts with '-'")
	}
	if len(h) > 1 && strings.HasSuffix(h, "-") {
		why = append(why, "it ends with '-'")
	}
	return fmt.Errorf("%q is not a valid DNS label (%s): %s", h, HostnameRule, strings.Join(why, "; "))
}
