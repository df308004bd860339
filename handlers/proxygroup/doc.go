// Package proxygroup runs ProxyGroups: a ProxyGroup is a pipeline module (a
// StatefulSet of replicas, each with its own device) of type ingress, egress
// or kube-apiserver, and its members are three pipeline.MemberModule
// registrations with the pipeline's one member lifecycle and finalizer rule:
//   - Ingresses and Services annotated tailscale.com/proxy-group on an
//     ingress group, each a Tailscale Service (svc:<hostname>) that every
//     replica hosts, so that clients reach it under one MagicDNS name through
//     whichever replica control routes them to (members.go, members_kinds.go,
//     members_apply.go);
//   - ExternalName Services with a tailnet target on an egress group, each a
//     cluster Service in the operator namespace whose ports the replicas
//     listen on (egress.go, egress_apply.go). The group's own handler
//     allocates those ports, one group at a time through the runtime's queue,
//     from the cluster Services themselves (allocatePorts).
//
// proxygroup.go, members.go, egress.go and apiserver.go are pure (rendering
// and validation, unit tested); register.go and the *_apply.go files are the
// thin apply side. It exports only what other packages' tests read (names,
// conditions, reasons). It may import handlers/lib/cluster, pipeline, tsservice,
// proxyset, proxyclassrules, conditions, settings, resources, the ingress,
// service, egress and plugin modules (for their rules), proxy/config,
// internal/tailnet, internal/proxystate and runtime.
package proxygroup
