package main

import (
	"context"
	"os"
	"reflect"
	"strings"
	"testing"

	"sigs.k8s.io/kind/pkg/apis/config/defaults"
	"sigs.k8s.io/kind/pkg/apis/config/v1alpha4"
	"sigs.k8s.io/yaml"
)

// The node image is kind v0.33.0's own default, Kubernetes v1.37, pinned
// by digest; upgrading kind in go.mod makes this fail until NodeImage
// follows.
func TestNodeImage(t *testing.T) {
	if NodeImage != defaults.Image {
		t.Errorf("NodeImage %s, kind's default %s", NodeImage, defaults.Image)
	}
	if !strings.HasPrefix(NodeImage, "kindest/node:v1.37.") || !strings.Contains(NodeImage, "@sha256:") {
		t.Errorf("NodeImage %s: want kindest/node v1.37 by digest", NodeImage)
	}
}

func TestClusterConfig(t *testing.T) {
	c := ClusterConfig("tailplane-e2e")
	want := `apiVersion: kind.x-k8s.io/v1alpha4
kind: Cluster
name: tailplane-e2e
networking:
  apiServerAddress: 127.0.0.1
  ipFamily: ipv4
  kubeProxyMode: iptables
  podSubnet: 10.244.0.0/16
  serviceSubnet: 10.96.0.0/16
nodes:
- image: ` + NodeImage + `
  role: control-plane
`
	got, err := yaml.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != want {
		t.Errorf("cluster config:\n%s\nwant:\n%s", got, want)
	}
	// No mounts, port mappings, patches or feature gates: a stock kind
	// cluster.
	n := c.Nodes[0]
	if len(n.ExtraMounts) != 0 || len(n.ExtraPortMappings) != 0 || len(n.KubeadmConfigPatches) != 0 || len(n.Labels) != 0 {
		t.Errorf("node %+v", n)
	}
	if len(c.FeatureGates) != 0 || len(c.RuntimeConfig) != 0 || len(c.KubeadmConfigPatches) != 0 || len(c.ContainerdConfigPatches) != 0 || c.Networking.DisableDefaultCNI {
		t.Errorf("cluster %+v", c)
	}
	// Everything spelled out is what kind's defaults give: the config is
	// kind's default cluster with the image pinned.
	defaulted := ClusterConfig("tailplane-e2e")
	v1alpha4.SetDefaultsCluster(defaulted)
	if !reflect.DeepEqual(defaulted, c) {
		t.Errorf("kind's defaults change the config:\n%+v\n%+v", defaulted, c)
	}
	bare := &v1alpha4.Cluster{Name: "tailplane-e2e"}
	v1alpha4.SetDefaultsCluster(bare)
	bare.TypeMeta = c.TypeMeta
	if !reflect.DeepEqual(bare, c) {
		t.Errorf("not kind's default cluster:\n%+v\n%+v", bare, c)
	}
}

// The real Host on a machine without a Docker engine (this one; anywhere,
// with DOCKER_HOST pointing nowhere) fails with the message e2e:kind
// prints, before doing anything else.
func TestNoDockerEngine(t *testing.T) {
	t.Setenv("DOCKER_HOST", "unix:///nonexistent/docker.sock")
	o, _ := testOptions(t)
	r := &recorder{}
	err := Run(context.Background(), o, dockerHost{}, &fakeKind{recorder: r})
	if err == nil || !strings.HasPrefix(err.Error(), "e2e:kind needs a Docker engine: ") {
		t.Fatalf("err = %v", err)
	}
	if len(r.calls) != 0 {
		t.Errorf("asked kind anyway: %v", r.calls)
	}
	t.Log(err)

	// Without the docker command at all.
	t.Setenv("PATH", t.TempDir())
	err = Run(context.Background(), o, dockerHost{}, &fakeKind{recorder: r})
	if err == nil || err.Error() != "e2e:kind needs a Docker engine: the docker command is not installed (kind drives the engine through it)" {
		t.Fatalf("err = %v", err)
	}
	if _, err := os.Stat(o.Dir); !os.IsNotExist(err) {
		t.Errorf("made %s anyway", o.Dir)
	}
}

func TestIPv4Gateway(t *testing.T) {
	gw, err := ipv4Gateway("kind", "fc00:f853:ccd:e793::1 172.18.0.1 ")
	if err != nil || gw.String() != "172.18.0.1" {
		t.Errorf("gateway %v %v", gw, err)
	}
	if _, err := ipv4Gateway("kind", "fc00:f853:ccd:e793::1"); err == nil {
		t.Error("no IPv4 gateway: no error")
	}
}
