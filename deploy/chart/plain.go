package chart

import (
	"context"
	"fmt"
	"sort"
	"strings"
)

// PlaceholderClientID and PlaceholderClientSecret are the OAuth values the
// plain manifests are rendered with: users replace them, and the operator
// refuses to start while they are there.
const (
	PlaceholderClientID     = "REPLACE-WITH-OAUTH-CLIENT-ID"
	PlaceholderClientSecret = "REPLACE-WITH-OAUTH-CLIENT-SECRET"
)

// plainFiles maps each template to its file in deploy/manifests; the numeric
// prefixes order `kubectl apply -f deploy/manifests/` so that each object
// comes after what it needs.
var plainFiles = map[string]string{
	"templates/crds.yaml":             "01-crds.yaml",
	"templates/gateway-api-crds.yaml": "01-gateway-api-crds.yaml",
	"templates/rbac.yaml":             "02-rbac.yaml",
	"templates/oauth-secret.yaml":     "03-oauth-secret.yaml",
	"templates/ingressclass.yaml":     "04-ingressclass.yaml",
	"templates/deployment.yaml":       "05-deployment.yaml",
}

// plainNotes are comments put on top of a plain manifest, for kubectl users.
var plainNotes = map[string]string{
	"03-oauth-secret.yaml": `# kubectl users: replace both values before applying, or create the Secret
# yourself:
#   kubectl -n tailscale create secret generic operator-oauth \
#     --from-literal=client_id=... --from-literal=client_secret=...
# The operator refuses to start, with one line saying why, while these are
# placeholders.
`,
}

const namespaceManifest = `# The namespace of the operator and of every proxy it creates (OPERATOR_NAMESPACE).
apiVersion: v1
kind: Namespace
metadata:
  name: ` + Namespace + "\n"

// PlainManifests renders the chart with its default values (and the OAuth
// placeholders) into namespace tailscale, and returns deploy/manifests'
// files by name: what `kubectl apply -f deploy/manifests/` installs.
func PlainManifests(ctx context.Context) (map[string][]byte, error) {
	rel, err := Render(ctx, Namespace, map[string]any{"oauth": map[string]any{
		"clientId": PlaceholderClientID, "clientSecret": PlaceholderClientSecret}})
	if err != nil {
		return nil, err
	}
	const header = "# Generated from deploy/chart/" + Name + " (default values) by 'go tool task manifests:render'; do not edit.\n"
	out := map[string][]byte{"00-namespace.yaml": []byte(header + namespaceManifest)}
	byTemplate := SplitBySource(rel.Manifest)
	templates := make([]string, 0, len(byTemplate))
	for t := range byTemplate {
		templates = append(templates, t)
	}
	sort.Strings(templates)
	for _, t := range templates {
		name, ok := plainFiles[t]
		if !ok {
			return nil, fmt.Errorf("chart template %s has no plain manifest file: add it to plainFiles", t)
		}
		body := byTemplate[t]
		if note := plainNotes[name]; note != "" {
			// After the template's own comment, before the object.
			i := strings.Index(body, "\napiVersion:") + 1
			body = body[:i] + note + body[i:]
		}
		out[name] = []byte(header + body)
	}
	return out, nil
}
