package crds_test

import "strings"

// paritySamples are objects of the eight kinds: valid ones using most
// fields, and invalid ones for each CEL rule, pattern, enum and bound of the
// official CRDs.
func paritySamples() []sample {
	routes := map[string]any{"advertiseRoutes": []any{"10.42.0.0/16"}}
	eip := func(n int) []any {
		var out []any
		for i := range n {
			out = append(out, map[string]any{"allocationID": "eipalloc-0a" + string(rune('0'+i)), "subnetID": "subnet-0b" + string(rune('0'+i))})
		}
		return out
	}
	affinity := map[string]any{"nodeAffinity": map[string]any{"requiredDuringSchedulingIgnoredDuringExecution": map[string]any{
		"nodeSelectorTerms": []any{map[string]any{"matchExpressions": []any{map[string]any{"key": "zone", "operator": "In", "values": []any{"a"}}}}},
	}}}
	tolerations := []any{map[string]any{"key": "dedicated", "operator": "Exists", "effect": "NoSchedule"}}
	return []sample{
		// Connector.
		{name: "cn-subnet", kind: "Connector", spec: map[string]any{"subnetRouter": routes, "tags": []any{"tag:k8s"}, "hostname": "router"}},
		{name: "cn-exit-replicas", kind: "Connector", spec: map[string]any{"exitNode": true, "replicas": int64(3), "hostnamePrefix": "exit"}},
		{name: "cn-app", kind: "Connector", spec: map[string]any{"appConnector": map[string]any{"routes": []any{"10.0.0.0/8"}}}},
		{name: "cn-unknown-field", kind: "Connector", spec: map[string]any{"exitNode": true, "bogus": "pruned"}},
		{name: "cn-nothing", kind: "Connector", spec: map[string]any{"exitNode": false},
			want: "A Connector needs to have at least one of exit node, subnet router or app connector configured."},
		{name: "cn-app-and-subnet", kind: "Connector", spec: map[string]any{"appConnector": map[string]any{}, "subnetRouter": routes},
			want: "The appConnector field is mutually exclusive with exitNode and subnetRouter fields."},
		{name: "cn-app-and-exit", kind: "Connector", spec: map[string]any{"appConnector": map[string]any{}, "exitNode": true},
			want: "The appConnector field is mutually exclusive with exitNode and subnetRouter fields."},
		{name: "cn-hostname-replicas", kind: "Connector", spec: map[string]any{"exitNode": true, "hostname": "exit", "replicas": int64(2)},
			want: "The hostname field cannot be specified when replicas is greater than 1."},
		{name: "cn-hostname-prefix", kind: "Connector", spec: map[string]any{"exitNode": true, "hostname": "exit", "hostnamePrefix": "exit"},
			want: "The hostname and hostnamePrefix fields are mutually exclusive."},
		{name: "cn-tailnet-change", kind: "Connector", spec: map[string]any{"exitNode": true, "tailnet": "a"}, update: map[string]any{"tailnet": "b"},
			want: "Connector tailnet is immutable"},
		{name: "cn-replicas-change", kind: "Connector", spec: map[string]any{"exitNode": true, "tailnet": "a"}, update: map[string]any{"replicas": int64(2)}},
		{name: "cn-bad-tag", kind: "Connector", spec: map[string]any{"exitNode": true, "tags": []any{"k8s"}}, want: "should match"},
		{name: "cn-bad-cidr", kind: "Connector", spec: map[string]any{"subnetRouter": map[string]any{"advertiseRoutes": []any{"10.42.0.0/33"}}}},
		{name: "cn-no-routes", kind: "Connector", spec: map[string]any{"subnetRouter": map[string]any{"advertiseRoutes": []any{}}}},
		{name: "cn-bad-hostname", kind: "Connector", spec: map[string]any{"exitNode": true, "hostname": "-x"}},
		{name: "cn-negative-replicas", kind: "Connector", spec: map[string]any{"exitNode": true, "replicas": int64(-1)}},

		// ProxyClass.
		{name: "pc-full", kind: "ProxyClass", spec: map[string]any{
			"statefulSet": map[string]any{"labels": map[string]any{"team": "net"}, "pod": map[string]any{
				"affinity": affinity, "tolerations": tolerations, "dnsPolicy": "ClusterFirst",
				"tailscaleContainer": map[string]any{"imagePullPolicy": "IfNotPresent", "env": []any{map[string]any{"name": "A", "value": "1"}},
					"debug": map[string]any{"enable": true}},
			}},
			"metrics":         map[string]any{"enable": true, "serviceMonitor": map[string]any{"enable": true}},
			"tailscale":       map[string]any{"acceptRoutes": true},
			"staticEndpoints": map[string]any{"nodePort": map[string]any{"ports": []any{map[string]any{"port": int64(30001), "endPort": int64(30002)}}}},
		}},
		{name: "pc-monitor-without-metrics", kind: "ProxyClass", spec: map[string]any{"metrics": map[string]any{"enable": false, "serviceMonitor": map[string]any{"enable": true}}},
			want: "ServiceMonitor can only be enabled if metrics are enabled"},
		{name: "pc-metrics-enable-missing", kind: "ProxyClass", spec: map[string]any{"metrics": map[string]any{}}},
		{name: "pc-bad-label", kind: "ProxyClass", spec: map[string]any{"statefulSet": map[string]any{"labels": map[string]any{"team": "-x-"}}}},
		{name: "pc-long-label", kind: "ProxyClass", spec: map[string]any{"statefulSet": map[string]any{"pod": map[string]any{"labels": map[string]any{"a": strings.Repeat("a", 64)}}}}},
		{name: "pc-bad-env", kind: "ProxyClass", spec: map[string]any{"statefulSet": map[string]any{"pod": map[string]any{"tailscaleContainer": map[string]any{"env": []any{map[string]any{"name": "1X"}}}}}}},
		{name: "pc-bad-dns-policy", kind: "ProxyClass", spec: map[string]any{"statefulSet": map[string]any{"pod": map[string]any{"dnsPolicy": "Cloud"}}}},
		{name: "pc-no-ports", kind: "ProxyClass", spec: map[string]any{"staticEndpoints": map[string]any{"nodePort": map[string]any{"ports": []any{}}}}},

		// ProxyGroup.
		{name: "pg-ingress", kind: "ProxyGroup", spec: map[string]any{"type": "ingress", "replicas": int64(2), "tags": []any{"tag:k8s"}, "hostnamePrefix": "web", "proxyClass": "x"}},
		{name: "pg-apiserver", kind: "ProxyGroup", spec: map[string]any{"type": "kube-apiserver", "kubeAPIServer": map[string]any{"mode": "noauth", "hostname": "api"}}},
		{name: "pg-no-type", kind: "ProxyGroup", spec: map[string]any{"replicas": int64(1)}},
		{name: "pg-bad-type", kind: "ProxyGroup", spec: map[string]any{"type": "router"}},
		{name: "pg-bad-mode", kind: "ProxyGroup", spec: map[string]any{"type": "kube-apiserver", "kubeAPIServer": map[string]any{"mode": "open"}}},
		{name: "pg-bad-api-hostname", kind: "ProxyGroup", spec: map[string]any{"type": "kube-apiserver", "kubeAPIServer": map[string]any{"hostname": "API"}}},
		{name: "pg-type-change", kind: "ProxyGroup", spec: map[string]any{"type": "egress"}, update: map[string]any{"type": "ingress"}, want: "ProxyGroup type is immutable"},
		{name: "pg-tailnet-change", kind: "ProxyGroup", spec: map[string]any{"type": "egress", "tailnet": "a"}, update: map[string]any{"tailnet": "b"}, want: "ProxyGroup tailnet is immutable"},

		// DNSConfig.
		{name: "dc-full", kind: "DNSConfig", spec: map[string]any{"nameserver": map[string]any{
			"image": map[string]any{"repo": "example.com/ns", "tag": "v1"}, "service": map[string]any{"clusterIP": "10.0.0.53"},
			"pod":      map[string]any{"tolerations": tolerations, "affinity": affinity, "nodeSelector": map[string]any{"kubernetes.io/os": "linux"}},
			"replicas": int64(2),
		}}},
		{name: "dc-empty-nameserver", kind: "DNSConfig", spec: map[string]any{"nameserver": map[string]any{}}},
		{name: "dc-no-nameserver", kind: "DNSConfig", spec: map[string]any{}},
		{name: "dc-negative-replicas", kind: "DNSConfig", spec: map[string]any{"nameserver": map[string]any{"replicas": int64(-1)}}},
		{name: "dc-bad-toleration", kind: "DNSConfig", spec: map[string]any{"nameserver": map[string]any{"pod": map[string]any{"tolerations": []any{"x"}}}}},

		// Recorder.
		{name: "rec-defaults", kind: "Recorder", spec: map[string]any{"enableUI": true}},
		{name: "rec-s3-replicas", kind: "Recorder", spec: map[string]any{"replicas": int64(2), "tags": []any{"tag:rec"},
			"storage": map[string]any{"s3": map[string]any{"endpoint": "s3.example.com", "bucket": "rec", "credentials": map[string]any{"secret": map[string]any{"name": "s3"}}}},
			"statefulSet": map[string]any{"labels": map[string]any{"a": "b"}, "pod": map[string]any{
				"affinity": affinity, "tolerations": tolerations, "nodeSelector": map[string]any{"a": "b"},
				"serviceAccount": map[string]any{"name": "rec", "annotations": map[string]any{"eks.amazonaws.com/role-arn": "arn"}},
				"container": map[string]any{"image": "tsrecorder:v1", "imagePullPolicy": "Always", "env": []any{map[string]any{"name": "X", "value": "y"}},
					"resources": map[string]any{"limits": map[string]any{"memory": "64Mi"}}},
			}}}},
		{name: "rec-replicas-without-s3", kind: "Recorder", spec: map[string]any{"replicas": int64(2), "enableUI": true},
			want: "S3 storage must be used when deploying multiple Recorder replicas"},
		{name: "rec-replicas-empty-storage", kind: "Recorder", spec: map[string]any{"replicas": int64(3), "storage": map[string]any{}},
			want: "S3 storage must be used when deploying multiple Recorder replicas"},
		{name: "rec-tailnet-change", kind: "Recorder", spec: map[string]any{"enableUI": true, "tailnet": "a"}, update: map[string]any{"tailnet": "b"},
			want: "Recorder tailnet is immutable"},
		{name: "rec-ui-change", kind: "Recorder", spec: map[string]any{"enableUI": true, "tailnet": "a"}, update: map[string]any{"enableUI": false}},
		{name: "rec-bad-sa", kind: "Recorder", spec: map[string]any{"statefulSet": map[string]any{"pod": map[string]any{"serviceAccount": map[string]any{"name": "Bad_SA"}}}}},
		{name: "rec-bad-pull-policy", kind: "Recorder", spec: map[string]any{"statefulSet": map[string]any{"pod": map[string]any{"container": map[string]any{"imagePullPolicy": "Sometimes"}}}}},
		{name: "rec-bad-env", kind: "Recorder", spec: map[string]any{"statefulSet": map[string]any{"pod": map[string]any{"container": map[string]any{"env": []any{map[string]any{"name": "1X"}}}}}}},
		{name: "rec-bad-tag", kind: "Recorder", spec: map[string]any{"tags": []any{"rec"}}},
		{name: "rec-negative-replicas", kind: "Recorder", spec: map[string]any{"replicas": int64(-1)}},

		// Tailnet.
		{name: "tn-full", kind: "Tailnet", spec: map[string]any{"loginUrl": "https://control.example.com", "credentials": map[string]any{"secretName": "second"}}},
		{name: "tn-no-credentials", kind: "Tailnet", spec: map[string]any{"loginUrl": "https://control.example.com"}},
		{name: "tn-no-secret-name", kind: "Tailnet", spec: map[string]any{"credentials": map[string]any{}}},

		// ProxyGroupPolicy (namespaced).
		{name: "pgp-allow", kind: "ProxyGroupPolicy", ns: true, spec: map[string]any{"ingress": []any{"web"}, "egress": []any{"out", "db"}}},
		{name: "pgp-deny-all", kind: "ProxyGroupPolicy", ns: true, spec: map[string]any{}},
		{name: "pgp-bad-list", kind: "ProxyGroupPolicy", ns: true, spec: map[string]any{"ingress": "web"}},
		{name: "pgp-bad-item", kind: "ProxyGroupPolicy", ns: true, spec: map[string]any{"egress": []any{int64(1)}}},

		// PeerRelay.
		{name: "pr-defaults", kind: "PeerRelay", spec: map[string]any{}},
		{name: "pr-full", kind: "PeerRelay", spec: map[string]any{"replicas": int64(2), "tags": []any{"tag:relay"}, "hostnamePrefix": "relay", "proxyClass": "x",
			"service": map[string]any{"annotations": map[string]any{"a": "b"}}, "aws": map[string]any{"elasticIPs": eip(3)}}},
		{name: "pr-too-few-eips", kind: "PeerRelay", spec: map[string]any{"replicas": int64(3), "aws": map[string]any{"elasticIPs": eip(2)}},
			want: "spec.aws.elasticIPs must contain at least one entry per replica"},
		{name: "pr-default-replicas-eips", kind: "PeerRelay", spec: map[string]any{"aws": map[string]any{"elasticIPs": eip(1)}}},
		{name: "pr-scale-past-eips", kind: "PeerRelay", spec: map[string]any{"aws": map[string]any{"elasticIPs": eip(1)}}, update: map[string]any{"replicas": int64(2)},
			want: "spec.aws.elasticIPs must contain at least one entry per replica"},
		{name: "pr-no-eips", kind: "PeerRelay", spec: map[string]any{"aws": map[string]any{"elasticIPs": []any{}}}},
		{name: "pr-aws-empty", kind: "PeerRelay", spec: map[string]any{"aws": map[string]any{}}},
		{name: "pr-bad-allocation", kind: "PeerRelay", spec: map[string]any{"aws": map[string]any{"elasticIPs": []any{map[string]any{"allocationID": "eip-1", "subnetID": "subnet-1"}}}}},
		{name: "pr-bad-subnet", kind: "PeerRelay", spec: map[string]any{"aws": map[string]any{"elasticIPs": []any{map[string]any{"allocationID": "eipalloc-1", "subnetID": "net-1"}}}}},
		{name: "pr-missing-subnet", kind: "PeerRelay", spec: map[string]any{"aws": map[string]any{"elasticIPs": []any{map[string]any{"allocationID": "eipalloc-1"}}}}},
		{name: "pr-tailnet-change", kind: "PeerRelay", spec: map[string]any{"tailnet": "a"}, update: map[string]any{"tailnet": "b"}, want: "PeerRelay tailnet is immutable"},
		{name: "pr-bad-prefix", kind: "PeerRelay", spec: map[string]any{"hostnamePrefix": "-relay"}},
		{name: "pr-negative-replicas", kind: "PeerRelay", spec: map[string]any{"replicas": int64(-1)}},
	}
}
