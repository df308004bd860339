package config

import (
	"strings"
	"testing"
)

func TestConnectorValidation(t *testing.T) {
	base := func(c *Connector) *Config {
		return &Config{Version: Version, Hostname: "c-0", Role: RoleConnector, Connector: c}
	}
	for _, tc := range []struct {
		c    *Connector
		want string // "" is valid
	}{
		{&Connector{Routes: []string{"10.40.0.0/14", "fd00::/64"}}, ""},
		{&Connector{ExitNode: true}, ""},
		{&Connector{Routes: []string{"10.40.0.0/14"}, ExitNode: true}, ""},
		{&Connector{AppConnector: true, Routes: []string{"192.0.2.0/24"}}, ""},
		{&Connector{}, "needs routes, exitNode or appConnector"},
		{&Connector{AppConnector: true, ExitNode: true}, "appConnector and exitNode are exclusive"},
		{&Connector{Routes: []string{"10.40.0.1/14"}}, `"10.40.0.1/14" is not a masked prefix (did you mean 10.40.0.0/14?)`},
		{&Connector{Routes: []string{"10.0.0.0/8", "10.1.0.0/16"}}, `"10.1.0.0/16" overlaps 10.0.0.0/8`},
		{&Connector{Routes: []string{"100.100.0.0/16"}}, "overlaps the tailnet's own addresses 100.64.0.0/10"},
		{&Connector{Routes: []string{"0.0.0.0/0"}}, "routes everything; set exitNode instead"},
		{&Connector{Routes: []string{"10.0.0.0"}}, `"10.0.0.0" is not a CIDR`},
	} {
		err := base(tc.c).Validate()
		if tc.want == "" && err != nil {
			t.Errorf("%+v: %v", tc.c, err)
		}
		if tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)) {
			t.Errorf("%+v: got %v, want %q", tc.c, err, tc.want)
		}
	}
	if err := (&Config{Version: Version, Hostname: "c", Role: RoleConnector}).Validate(); err == nil || !strings.Contains(err.Error(), `connector: is required for role "connector"`) {
		t.Errorf("missing section: %v", err)
	}
}
