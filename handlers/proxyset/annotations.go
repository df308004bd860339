package proxyset

import (
	"fmt"

	"tailscale.com/util/dnsname"

	"github.com/tailplane/tailplane/handlers/settings"
)

// Tags returns the proxy's ACL tags: the tailscale.com/tags annotation
// (comma-separated, each checked with tailcfg.CheckTag) or, without it, the
// defaults. The error names every invalid tag, in the official operator's
// words ("invalid tag %q: ...").
func Tags(annotations map[string]string, defaults []string) ([]string, error) {
	v, ok := annotations[AnnotationTags]
	if !ok {
		return defaults, nil
	}
	tags, err := settings.ParseTags(v)
	if err != nil {
		return nil, fmt.Errorf("annotation %s: %w", AnnotationTags, err)
	}
	return tags, nil
}

// ProxyClassName returns the ProxyClass a Service or Ingress asks for: the
// tailscale.com/proxy-class label, else the annotation of the same name,
// else the default (PROXY_DEFAULT_CLASS). Set but empty counts as set.
func ProxyClassName(labels, annotations map[string]string, def string) string {
	if v, ok := labels[LabelAnnotationProxyCls]; ok {
		return v
	}
	if v, ok := annotations[LabelAnnotationProxyCls]; ok {
		return v
	}
	return def
}

// ValidHostname checks a tailnet hostname (one DNS label, at most 63
// characters) with the same rules as the official operator.
func ValidHostname(h string) error {
	return dnsname.ValidLabel(h)
}
