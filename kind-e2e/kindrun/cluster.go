package main

import (
	"sigs.k8s.io/kind/pkg/apis/config/v1alpha4"
)

// NodeImage is the node image of kind v0.33.0's release notes, Kubernetes
// v1.37.0, pinned by digest: what `kind create cluster` v0.33.0 uses by
// default (a test checks it still equals kind's default). The kindest/node
// image is about 1 GiB, pulled once from Docker Hub by the Docker engine.
const NodeImage = "kindest/node:v1.37.0@sha256:a1ed56cfb0e7b93589bdf97c8cd566405a265939e3620fc4f5de89adff580ae5"

// ClusterConfig is the kind cluster e2e:kind creates: one control-plane
// node (kind lets a lone control plane run pods) from NodeImage, with kind's
// default networking spelled out: IPv4, the API server on 127.0.0.1 at a
// random port (this machine's kubectl and Helm reach it), pods in
// 10.244.0.0/16 (kindnet), Services in 10.96.0.0/16, kube-proxy in iptables
// mode. No extra mounts or port mappings: the images are loaded into the
// node, and the tailnet is reached from pods at the kind network's gateway.
func ClusterConfig(name string) *v1alpha4.Cluster {
	return &v1alpha4.Cluster{
		TypeMeta: v1alpha4.TypeMeta{Kind: "Cluster", APIVersion: "kind.x-k8s.io/v1alpha4"},
		Name:     name,
		Nodes:    []v1alpha4.Node{{Role: v1alpha4.ControlPlaneRole, Image: NodeImage}},
		Networking: v1alpha4.Networking{
			IPFamily:         v1alpha4.IPv4Family,
			APIServerAddress: "127.0.0.1",
			PodSubnet:        "10.244.0.0/16",
			ServiceSubnet:    "10.96.0.0/16",
			KubeProxyMode:    v1alpha4.IPTablesProxyMode,
		},
	}
}
