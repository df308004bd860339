package tailnet

import (
	"fmt"
	"hash/fnv"
	"slices"
	"strings"
	"time"

	"tailscale.com/tailcfg"
)

// defaultLogin is the login of the tailnet's owner (an admin), who owns
// the untagged devices of keys the OAuth client mints.
func (t *Tailnet) defaultLogin() string { return "devcluster@" + t.MagicDNSDomain }

// owner returns the user and login a node belongs to: tagged devices to
// "tagged-devices" (as on Tailscale), the others to the user whose key
// let them in (login; empty: the tailnet's owner).
func (t *Tailnet) owner(tags []string, login string) (*tailcfg.User, *tailcfg.Login) {
	if len(tags) > 0 {
		return &tailcfg.User{ID: taggedDevicesID, DisplayName: "Tagged Devices"},
			&tailcfg.Login{ID: tailcfg.LoginID(taggedDevicesID), Provider: "devcluster", LoginName: "tagged-devices", DisplayName: "Tagged Devices"}
	}
	if login == "" || login == t.defaultLogin() {
		return &tailcfg.User{ID: t.ownerID, DisplayName: "devcluster"},
			&tailcfg.Login{ID: tailcfg.LoginID(t.ownerID), Provider: "devcluster", LoginName: t.defaultLogin(), DisplayName: "devcluster"}
	}
	// A stable ID per login, away from 1 and from taggedDevicesID.
	h := fnv.New32a()
	_, _ = h.Write([]byte(login))
	id := tailcfg.UserID(1000 + h.Sum32()%1_000_000)
	name, _, _ := strings.Cut(login, "@")
	return &tailcfg.User{ID: id, DisplayName: name},
		&tailcfg.Login{ID: tailcfg.LoginID(id), Provider: "devcluster", LoginName: login, DisplayName: name}
}

// loginOf is the login of the user who owns n ("" for tagged devices).
func (t *Tailnet) loginOf(n *tailcfg.Node) string {
	if len(n.Tags) > 0 {
		return ""
	}
	_, l := t.owner(nil, t.devices.info(n.Key).User)
	return l.LoginName
}

// UserAuthKey mints a single-use, preauthorized auth key whose device
// belongs to the user login (user@domain), as a key a user creates in
// the admin console: untagged devices are that user's, and the policy's
// groups (and Config.Groups) decide which groups they are in. Tags must
// be owned by the user in the policy's tagOwners (directly, through a
// group, autogroup:member, or autogroup:admin for the tailnet's owner).
func (t *Tailnet) UserAuthKey(login string, tags ...string) (string, error) {
	if !strings.Contains(login, "@") {
		return "", fmt.Errorf("tailnet: user %q is not user@domain", login)
	}
	t.routeMu.Lock()
	p := t.routes.policy
	t.routeMu.Unlock()
	if err := p.checkUserKeyTags(login, login == t.defaultLogin(), tags); err != nil {
		return "", err
	}
	now := time.Now().UTC()
	k, err := t.store.mint(authKey{Description: "user key of " + login, Created: now, Expires: now.Add(24 * time.Hour),
		Preauthorized: true, Tags: tags, User: login})
	if err != nil {
		return "", fmt.Errorf("tailnet: mint a key for %s: %w", login, err)
	}
	return k.Secret, nil
}

// checkTagOwners checks the policy's tagOwners: tags as Tailscale spells
// them, owners that are tags, groups, users or autogroups.
func (p *policy) checkTagOwners() error {
	for tag, owners := range p.TagOwners {
		if err := tailcfg.CheckTag(tag); err != nil {
			return fmt.Errorf("policy: tagOwners: %q: %w", tag, err)
		}
		for _, o := range owners {
			switch o {
			case "autogroup:admin", "autogroup:owner", "autogroup:member", "autogroup:network-admin", "autogroup:it-admin":
				continue
			}
			if err := p.checkIdentity(o); err != nil || strings.HasPrefix(o, "autogroup:") {
				return fmt.Errorf("policy: tagOwners[%s]: %q is not a tag, group, user or autogroup", tag, o)
			}
		}
	}
	return nil
}

// notPermitted is the Tailscale API's answer to an auth key request with
// tags its requester may not use.
func notPermitted(tags []string) error {
	return fmt.Errorf("requested tags %v are invalid or not permitted", tags)
}

// checkKeyTags decides, as Tailscale does, whether an OAuth client
// carrying clientTags may mint an auth key with tags: each tag must be
// defined in tagOwners and be one of the client's tags or owned by one of
// them. A client with no tags acts with every tag (an admin's access
// token), and a policy without tagOwners checks nothing (devcluster's
// default policy).
func (p *policy) checkKeyTags(clientTags, tags []string) error {
	if len(tags) == 0 || p.TagOwners == nil {
		return nil
	}
	for _, tag := range tags {
		owners, defined := p.TagOwners[tag]
		if !defined || (len(clientTags) > 0 && !slices.Contains(clientTags, tag) &&
			!slices.ContainsFunc(owners, func(o string) bool { return slices.Contains(clientTags, o) })) {
			return notPermitted(tags)
		}
	}
	return nil
}

// checkUserKeyTags is checkKeyTags for a key a user mints: each tag's
// owners must name the user (the user, a group with them,
// autogroup:member, or autogroup:admin/owner when admin).
func (p *policy) checkUserKeyTags(login string, admin bool, tags []string) error {
	if len(tags) == 0 || p.TagOwners == nil {
		return nil
	}
	for _, tag := range tags {
		owners, defined := p.TagOwners[tag]
		if !defined || !slices.ContainsFunc(owners, func(o string) bool {
			return ((o == "autogroup:admin" || o == "autogroup:owner") && admin) || p.matches(o, nil, login)
		}) {
			return notPermitted(tags)
		}
	}
	return nil
}
