// Package proxygroup runs ProxyGroups and the objects they serve: a
// ProxyGroup is a pipeline module (a StatefulSet of replicas, each with its
// own device); Ingresses and Services annotated tailscale.com/proxy-group
// are members of an ingress group, each one a Tailscale Service
// (svc:<hostname>) that every replica hosts, so that clients reach it under
// one MagicDNS name through whichever replica control routes them to.
//
// proxygroup.go and members.go are pure (rendering and validation, unit
// tested); register.go and members_apply.go are the thin apply side. It may
// import handlers/lib/cluster, pipeline, proxyset, ingress, service, resources,
// proxy/config, internal/tailnet and runtime.
package proxygroup
