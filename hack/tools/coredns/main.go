// Command coredns is CoreDNS (github.com/coredns/coredns, the version this
// module pins) with only the plugins the kind node's cluster DNS uses:
// those of kubeadm's default Corefile (errors, health, ready, kubernetes,
// prometheus, forward, cache, loop, reload, loadbalance) plus log for
// debugging. Upstream's main links every plugin, most of them cloud
// backends (Azure, Route 53, Cloud DNS, Datadog tracing...) that the node
// never loads and that make its cold build several times longer.
//
// Plugins register themselves with CoreDNS from their package init, and
// CoreDNS runs them in the fixed order of its directive list whatever order
// they are imported in, so importing a subset is all a smaller build takes.
// A Corefile naming a plugin left out fails at startup with "unknown
// directive", so a kubeadm upgrade that adds one to its Corefile shows at
// once.
package main

import (
	"github.com/coredns/coredns/coremain"

	_ "github.com/coredns/coredns/plugin/cache"
	_ "github.com/coredns/coredns/plugin/errors"
	_ "github.com/coredns/coredns/plugin/forward"
	_ "github.com/coredns/coredns/plugin/health"
	_ "github.com/coredns/coredns/plugin/kubernetes"
	_ "github.com/coredns/coredns/plugin/loadbalance"
	_ "github.com/coredns/coredns/plugin/log"
	_ "github.com/coredns/coredns/plugin/loop"
	_ "github.com/coredns/coredns/plugin/metrics" // the "prometheus" directive
	_ "github.com/coredns/coredns/plugin/ready"
	_ "github.com/coredns/coredns/plugin/reload"
)

func main() { coremain.Run() }
