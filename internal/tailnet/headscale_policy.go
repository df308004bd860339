package tailnet

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"

	"github.com/tailscale/hujson"
)

// Headscale v0.27 applies any syntactically valid tag a pre-auth key made
// with an API key carries: the API key is the admin's power, and tagOwners
// is not consulted. Tailscale refuses an auth key whose tags the caller
// does not own, and the operator's users rely on that, so the backend reads
// Headscale's policy (GET /api/v1/policy, which returns the policy file in
// file mode and the stored one in database mode) before each mint and
// refuses as Tailscale's API does, with its words.

// hsPolicy is the part of a Headscale policy that decides tag ownership.
type hsPolicy struct {
	Groups    map[string][]string `json:"groups"`
	TagOwners map[string][]string `json:"tagOwners"`
}

// NotPermittedTags is the Tailscale API's message (HTTP 400) for an auth
// key whose tags its requester does not own in tagOwners; the Headscale
// backend answers with it too.
func NotPermittedTags(tags []string) string {
	return fmt.Sprintf("requested tags %v are invalid or not permitted", tags)
}

// TagOwnerError is wrapped by the Headscale backend's refusal of tags
// (an *Error with NotPermittedTags), so that the message shown to users
// says what owns a tag there: the user the keys belong to, not an OAuth
// client's tags.
type TagOwnerError struct {
	// User is the Headscale user of the operator's pre-auth keys.
	User string
}

func (e *TagOwnerError) Error() string {
	return "Headscale's tagOwners do not give the tags to user " + e.User
}

// policy reads Headscale's policy; nil when Headscale has none (then it
// applies no tag owners: every device reaches every other).
func (h *Headscale) policy(ctx context.Context) (*hsPolicy, error) {
	var resp struct {
		Policy string `json:"policy"`
	}
	err := h.do(ctx, "read the policy", http.MethodGet, "/api/v1/policy", nil, &resp)
	var e *Error
	if errors.As(err, &e) && noPolicy(e) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	if strings.TrimSpace(resp.Policy) == "" {
		return nil, nil
	}
	std, err := hujson.Standardize([]byte(resp.Policy))
	if err != nil {
		return nil, &Error{Op: "read the policy", Status: http.StatusOK, Message: "the policy is not HuJSON: " + err.Error(), Err: err}
	}
	var p hsPolicy
	if err := json.Unmarshal(std, &p); err != nil {
		return nil, &Error{Op: "read the policy", Status: http.StatusOK, Message: "unreadable policy: " + err.Error(), Err: err}
	}
	return &p, nil
}

// noPolicy reports whether Headscale's answer says it runs without a
// policy: no policy.path in file mode (it opens "") or none stored yet in
// database mode.
func noPolicy(e *Error) bool {
	return e.Status >= 500 && (strings.Contains(e.Message, `reading policy from path ""`) ||
		strings.Contains(e.Message, "record not found"))
}

// checkTags refuses tags the operator does not own in p, as Tailscale
// judges an auth key request: every tag must be declared in tagOwners, and
// owned by the operator's identity. On Headscale that identity is the user
// its keys belong to (an owner "user@", or a group listing it) and the API
// key's admin power, which alone may give a tag declared without owners
// (Headscale v0.27 takes no tags as tag owners, so the owners a Tailscale
// policy gives as the operator's tags are left out there). A policy without
// tagOwners checks nothing: Headscale then restricts no tag.
func (h *Headscale) checkTags(p *hsPolicy, tags []string) error {
	if p == nil || p.TagOwners == nil || len(tags) == 0 {
		return nil
	}
	for _, tag := range tags {
		owners, declared := p.TagOwners[tag]
		if !declared || (len(owners) > 0 && !slices.ContainsFunc(owners, func(o string) bool { return h.ownedBy(p, o) })) {
			return &Error{Op: "create auth key", Status: http.StatusBadRequest, Message: NotPermittedTags(tags),
				Err: &TagOwnerError{User: h.user}}
		}
	}
	return nil
}

// ownedBy reports whether owner (a tagOwners entry) names the keys' user,
// directly or through a group.
func (h *Headscale) ownedBy(p *hsPolicy, owner string) bool {
	if strings.HasPrefix(owner, "group:") {
		return slices.ContainsFunc(p.Groups[owner], func(m string) bool { return h.isUser(m) })
	}
	return h.isUser(owner)
}

// isUser reports whether a policy's user token ("name@", as Headscale
// spells a user without an email) is the keys' user.
func (h *Headscale) isUser(token string) bool {
	name, ok := strings.CutSuffix(token, "@")
	return ok && name == h.user
}
