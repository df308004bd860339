package tailnet

import (
	"errors"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestReadSecret(t *testing.T) {
	secret := func(data map[string]string) *corev1.Secret {
		s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "creds"}, Data: map[string][]byte{}}
		for k, v := range data {
			s.Data[k] = []byte(v)
		}
		return s
	}
	for _, tc := range []struct {
		data map[string]string
		want string
	}{
		{nil, `Secret "creds" is empty`},
		{map[string]string{"client_secret": "s"}, `Secret "creds" is missing the client_id field`},
		{map[string]string{"client_id": "i"}, `Secret "creds" must contain either a client_secret or an audience field`},
	} {
		if _, msg := ReadSecret(secret(tc.data)); !strings.Contains(msg, tc.want) {
			t.Errorf("%v: got %q, want %q", tc.data, msg, tc.want)
		}
	}
	creds, msg := ReadSecret(secret(map[string]string{"client_id": "i", "client_secret": "s"}))
	if msg != "" || creds != (Credentials{ClientID: "i", ClientSecret: "s"}) {
		t.Fatalf("got %+v %q", creds, msg)
	}
	// An audience makes it a workload identity client, as with the
	// official operator, whatever else the Secret holds.
	creds, msg = ReadSecret(secret(map[string]string{"client_id": "i", "audience": "a", "client_secret": "s"}))
	if msg != "" || creds != (Credentials{ClientID: "i", Audience: "a"}) {
		t.Fatalf("workload identity: got %+v %q", creds, msg)
	}
}

func TestProbeMessageAndCondition(t *testing.T) {
	if msg := ProbeMessage([]Probe{{"list devices", nil}}); msg != "" {
		t.Fatalf("no failure: %q", msg)
	}
	msg := ProbeMessage([]Probe{{"list devices", nil}, {"list auth keys", errors.New("403")}, {"list tailscale services", errors.New("404")}})
	if msg != "failed to list auth keys: 403\nfailed to list tailscale services: 404" {
		t.Fatalf("message %q", msg)
	}
	c := Ready(ReasonInvalidOAuth, msg, 3)
	if c.Status != metav1.ConditionFalse || c.Reason != "InvalidOAuth" || c.ObservedGeneration != 3 || IsReady([]metav1.Condition{c}) {
		t.Fatalf("condition %+v", c)
	}
	c = Ready(ReasonValid, "", 4)
	if c.Status != metav1.ConditionTrue || c.Message != "TailnetValid" || !IsReady([]metav1.Condition{c}) {
		t.Fatalf("condition %+v", c)
	}
}
