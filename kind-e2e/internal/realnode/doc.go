// Package realnode is devcluster's real node (`devcluster up --node real`):
// containerd with Debian's runc and the CNI plugins, and a kubelet of the
// pinned Kubernetes, each a child process of devcluster with its state under
// the cluster directory, plus the images they run, imported from OCI archives
// (no registry). Pods get their own network namespace on the bridge dcbr0 and
// real containers, as on a kind node.
//
// Only one real node runs on a machine at a time: the kubelet's cgroups
// (kubepods), the bridge and the pod range are the machine's. Start takes a
// machine-wide lock and says so when another one holds it.
//
// It may import client-go, the CRI API, the Kubernetes API types,
// kind-e2e/internal/pki and charmbracelet/log.
package realnode
