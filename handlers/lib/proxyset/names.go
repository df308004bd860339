package proxyset

import (
	"crypto/sha256"
	"encoding/hex"
	"strconv"
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

// baseName is the name shared by the StatefulSet, ServiceAccount, Role and
// RoleBinding of p's proxy: "ts-<parent name>-<hash>", where the hash of
// the parent's name key (Parent.NameKey, else its type), namespace and name
// makes it unique and stable across operator restarts (so server-side apply
// finds the same objects again), and the parent name is shortened so the
// whole stays within 52 characters.
func baseName(p Parent) string {
	key := p.NameKey
	if key == "" {
		key = p.Type
	}
	sum := sha256.Sum256([]byte(key + "/" + p.Namespace + "/" + p.Name))
	suffix := hex.EncodeToString(sum[:])[:8]
	room := maxBaseLength - len("ts-") - 1 - len(suffix)
	short := sanitize(p.Name)
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

// Names are the names of one proxy replica's objects, all in the operator
// namespace. A parent's proxy is a StatefulSet of one or more replicas; each
// replica has its own config Secret, state Secret, auth key and device.
type Names struct {
	// StatefulSet, ServiceAccount, Role and RoleBinding of the whole proxy
	// share this name.
	Base string
	// Ordinal is the replica's index in the StatefulSet.
	Ordinal int
	// ConfigSecret holds the replica's proxy config (config.SecretKey):
	// "<Base>-<ordinal>-config", which the Pod names from its own name.
	ConfigSecret string
	// StateSecret is the replica's kubestore: the tailscaled state and the
	// device_* keys. It is named like the replica's Pod, "<Base>-<ordinal>".
	StateSecret string
}

// Replica returns the names of replica ordinal of the same proxy.
func (n Names) Replica(ordinal int) Names {
	pod := n.Base + "-" + strconv.Itoa(ordinal)
	return Names{Base: n.Base, Ordinal: ordinal, ConfigSecret: pod + "-config", StateSecret: pod}
}

// LegacyConfigSecret is the config Secret of releases that ran a single
// replica per proxy, "<Base>-config"; the pipeline removes it.
func (n Names) LegacyConfigSecret() string { return n.Base + "-config" }

// OrdinalOf returns the ordinal of a replica's state or config Secret name
// under base, or false if the name is no replica Secret of base.
func OrdinalOf(base, secretName string) (int, bool) {
	rest, ok := strings.CutPrefix(secretName, base+"-")
	if !ok {
		return 0, false
	}
	rest = strings.TrimSuffix(rest, "-config")
	i, err := strconv.Atoi(rest)
	if err != nil || i < 0 || strconv.Itoa(i) != rest {
		return 0, false
	}
	return i, true
}

// OfficialLabels are the official operator's labels on every object of
// p's proxy, whatever its role: they find the objects again (there are no
// owner references across namespaces).
func (p Parent) OfficialLabels() map[string]string {
	return map[string]string{
		proxystate.LabelManaged:         "true",
		proxystate.LabelParentName:      TruncateLabelValue(p.Name),
		proxystate.LabelParentNamespace: p.Namespace,
		proxystate.LabelParentType:      p.Type,
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
