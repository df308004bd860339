package pipeline

import (
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/tailplane/tailplane/internal/tailnet"
)

// TagsRetry is how often a proxy whose auth key the tailnet refused for
// its tags asks again: the fix is an edit of the tailnet policy file,
// which the operator cannot watch.
const TagsRetry = 5 * time.Minute

// RefusedTags reports whether err is the Tailscale API refusing an auth
// key because the operator's OAuth client may not use tags (HTTP 400,
// "requested tags [...] are invalid or not permitted"), and returns the
// message to show on the parent: the API's words, then what to change.
func RefusedTags(err error, tags []string) (string, bool) {
	var e *tailnet.Error
	if !errors.As(err, &e) || e.Status != http.StatusBadRequest || !strings.Contains(e.Message, "are invalid or not permitted") {
		return "", false
	}
	list := strings.Join(tags, ", ")
	if owner, ok := errors.AsType[*tailnet.TagOwnerError](err); ok {
		return fmt.Sprintf("the tailnet refused an auth key for the proxy's tags %s: %q. Headscale's policy must give the operator "+
			"these tags: in its tagOwners, declare %s with the owner %q (the Headscale user of the operator's pre-auth keys, "+
			"headscale.user), a group listing it, or no owners, or give the proxy tags it owns (the tailscale.com/tags "+
			"annotation, or spec.tags of the ProxyGroup or Connector). Tried again every %s", list, e.Message, list, owner.User+"@", TagsRetry), true
	}
	return fmt.Sprintf("the tailnet refused an auth key for the proxy's tags %s: %q. The operator's OAuth client may only create "+
		"devices with its own tags and the tags they own: in the tailnet policy file, make the client's tag "+
		"(tag:k8s-operator in the official install) an owner of %s in tagOwners, or give the proxy tags the client owns (the tailscale.com/tags "+
		"annotation, or spec.tags of the ProxyGroup or Connector). Tried again every %s", list, e.Message, list, TagsRetry), true
}
