package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"github.com/tailplane/tailplane/kind-e2e/internal/tailnet"
	"os"
	"strings"
	"time"

	"github.com/charmbracelet/log"
	"tailscale.com/tailcfg"
)

// tailnetOptions are the tailnet settings of `devcluster up`.
type tailnetOptions struct {
	// policy is the policy file's text ("": the saved policy) and
	// policyPath the file, watched for changes while the cluster runs.
	policy, policyPath string
	// clientTags are the OAuth client's tags (tailnet.Config.ClientTags).
	clientTags []string
	// groups is the user directory's groups (tailnet.Config.Groups).
	groups groupFlags
	// tailnets is 1, or 2 for a second tailnet that Tailnet objects can name.
	tailnets int
	// control is the control server: devcluster's own (controlDevcluster)
	// or Headscale (controlHeadscale, its binary headscaleBin).
	control, headscaleBin string
	// federation is the first tailnet's workload identity federation
	// client (clusterFederation), nil for none.
	federation *tailnet.Federation
}

// policySetter is a control server whose policy can be replaced while it
// runs.
type policySetter interface {
	SetPolicy(policy string) error
}

// isOwnFlag reports whether name is one of addFlags' flags: they shape a
// tailnet devcluster starts, so up --tailnet-from takes none.
func (*tailnetOptions) isOwnFlag(name string) bool {
	switch name {
	case "policy", "oauth-tags", "tailnets", "control", "headscale", "group":
		return true
	}
	return false
}

// addFlags registers the tailnet's flags of `devcluster up` on fs.
func (o *tailnetOptions) addFlags(fs *flag.FlagSet) func() error {
	policyFile := fs.String("policy", "", "tailnet policy file (HuJSON: acls, grants, tagOwners, autoApprovers, nodeAttrs); replaces the saved one and is re-read when it changes (default: the saved one, else allow everything and approve every advertised route and exit node)")
	tags := fs.String("oauth-tags", "tag:k8s-operator", "comma-separated tags of the OAuth client: it may mint auth keys with these tags and the tags they own in the policy's tagOwners (empty: all tags)")
	fs.IntVar(&o.tailnets, "tailnets", 1, "number of tailnets: 1, or 2 for a second tailnet that Tailnet objects can name: behind the same control server and API URL, told apart by its own OAuth client and auth keys (in tailnet.env as SECOND_TS_*), as Tailscale serves its tailnets")
	fs.StringVar(&o.control, "control", controlDevcluster, "control server: devcluster (its own, with the Tailscale API: OAuth client, Tailscale Services, certificates) or headscale (Headscale v0.27.1 from go tool task test:headscale, with devcluster's DERP; HEADSCALE_URL and HEADSCALE_API_KEY in tailnet.env)")
	fs.StringVar(&o.headscaleBin, "headscale", "", "with --control headscale: the headscale binary (default: headscale next to devcluster)")
	fs.Var(&o.groups, "group", "group of the tailnet's user directory, group:name=user@domain,... (repeatable); the policy may use it without defining it")
	return func() error {
		if o.tailnets != 1 && o.tailnets != 2 {
			return fmt.Errorf("--tailnets %d: want 1 or 2", o.tailnets)
		}
		if err := o.checkControl(); err != nil {
			return err
		}
		for _, t := range strings.Split(*tags, ",") {
			if t = strings.TrimSpace(t); t == "" {
				continue
			}
			if err := tailcfg.CheckTag(t); err != nil {
				return fmt.Errorf("--oauth-tags: %q: %w", t, err)
			}
			o.clientTags = append(o.clientTags, t)
		}
		if *policyFile == "" {
			return nil
		}
		b, err := os.ReadFile(*policyFile)
		if err != nil {
			return fmt.Errorf("--policy: %w", err)
		}
		o.policy, o.policyPath = string(b), *policyFile
		return nil
	}
}

// groupFlags are the --group flags: group name -> member logins.
type groupFlags map[string][]string

func (g *groupFlags) String() string { return fmt.Sprint(map[string][]string(*g)) }

func (g *groupFlags) Set(s string) error {
	name, members, ok := strings.Cut(s, "=")
	if !ok || !strings.HasPrefix(name, "group:") || members == "" {
		return errors.New("want group:name=user@domain,...")
	}
	if *g == nil {
		*g = groupFlags{}
	}
	for _, m := range strings.Split(members, ",") {
		if !strings.Contains(m, "@") {
			return fmt.Errorf("member %q is not user@domain", m)
		}
		(*g)[name] = append((*g)[name], m)
	}
	return nil
}

// watchPolicy re-reads the policy file every two seconds until ctx ends
// and installs it when its content changed, as an edit in the admin
// console would: packet filters, node attributes and approvals follow at
// once. A file that is not a valid policy is reported and the tailnet
// keeps the policy it has.
func watchPolicy(ctx context.Context, o tailnetOptions, tn policySetter, logger *log.Logger) {
	if o.policyPath == "" {
		return
	}
	last := []byte(o.policy)
	tick := time.NewTicker(2 * time.Second)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		b, err := os.ReadFile(o.policyPath)
		if err != nil || bytes.Equal(b, last) {
			continue
		}
		last = b
		if err := tn.SetPolicy(string(b)); err != nil {
			logger.Error("the tailnet policy file changed and is refused; the tailnet keeps its policy", "file", o.policyPath, "err", err)
			continue
		}
		logger.Info("tailnet policy reloaded", "file", o.policyPath)
	}
}
