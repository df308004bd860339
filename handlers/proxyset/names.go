package proxyset

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"

	"github.com/tailplane/tailplane/internal/proxystate"
)

// Parent types, the values of proxystate.LabelParentType.
const (
	ParentService = "svc"
	ParentIngress = "ingress"
)

// maxBaseLength keeps the StatefulSet name short enough that its Pods'
// controller-revision-hash label (name + "-" + 10 chars) fits in 63.
const maxBaseLength = 52

// BaseName is the name shared by a proxy's StatefulSet, ServiceAccount, Role
// and RoleBinding: "ts-<parent name>-<hash>", where the hash of the parent's
// type, namespace and name makes it unique and stable across operator
// restarts (so server-side apply finds the same objects again), and the
// parent name is shortened so the whole stays within 52 characters.
func BaseName(parentType, namespace, name string) string {
	sum := sha256.Sum256([]byte(parentType + "/" + namespace + "/" + name))
	suffix := hex.EncodeToString(sum[:])[:8]
	room := maxBaseLength - len("ts-") - 1 - len(suffix)
	short := sanitize(name)
	if len(short) > room {
		short = strings.TrimRight(short[:room], "-.")
	}
	return "ts-" + short + "-" + suffix
}

// sanitize keeps lowercase letters, digits and dashes (Kubernetes names may
// contain dots, which StatefulSet Pod hostnames may not).
func sanitize(s string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(s) {
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '-' {
			b.WriteRune(r)
		} else {
			b.WriteByte('-')
		}
	}
	return b.String()
}

// Names are the names of one proxy's objects, all in the operator namespace.
type Names struct {
	// StatefulSet, ServiceAccount, Role and RoleBinding share this name.
	Base string
	// ConfigSecret holds the proxy config (config.SecretKey).
	ConfigSecret string
	// StateSecret is the proxy's kubestore: the tailscaled state and the
	// device_* keys. It is named like the proxy's only Pod.
	StateSecret string
}

// NamesFor returns the names of the proxy of a parent.
func NamesFor(parentType, namespace, name string) Names {
	base := BaseName(parentType, namespace, name)
	return Names{Base: base, ConfigSecret: base + "-config", StateSecret: base + "-0"}
}

// ChildLabels are the labels on every object of a parent's proxy, used to
// find them again (there are no owner references across namespaces).
func ChildLabels(parentType, namespace, name string) map[string]string {
	return map[string]string{
		proxystate.LabelManaged:         "true",
		proxystate.LabelParentName:      TruncateLabelValue(name),
		proxystate.LabelParentNamespace: namespace,
		proxystate.LabelParentType:      parentType,
	}
}

// TruncateLabelValue returns v if it fits a label value (63 characters);
// otherwise its first 54 characters, a dash and 8 hex digits of its sha256,
// so that distinct long values stay distinct.
func TruncateLabelValue(v string) string {
	if len(v) <= 63 {
		return v
	}
	sum := sha256.Sum256([]byte(v))
	return strings.TrimRight(v[:54], "-._") + "-" + hex.EncodeToString(sum[:])[:8]
}
