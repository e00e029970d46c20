// Command cert-manager-controller runs cert-manager's own controllers for the node harness (e2e/build.sh
// cert-manager), as a host process against the harness's API server. cert-manager's controller binary is a
// nested module the Go module proxy does not serve, so this file wires the controllers of the root module
// (github.com/cert-manager/cert-manager, which the proxy serves) itself: the Certificate controllers, the
// CertificateRequest approver and the SelfSigned and CA issuers. No ACME, Vault or Venafi, no webhook, no
// leader election: one process, for tests.
package main

import (
	"context"
	"flag"
	"log"
	"os/signal"
	"sort"
	"syscall"
	"time"

	"github.com/cert-manager/cert-manager/pkg/controller"

	// Each of these registers its controller with controller.Register in an init function.
	_ "github.com/cert-manager/cert-manager/pkg/controller/certificaterequests/approver"
	_ "github.com/cert-manager/cert-manager/pkg/controller/certificaterequests/ca"
	_ "github.com/cert-manager/cert-manager/pkg/controller/certificaterequests/selfsigned"
	_ "github.com/cert-manager/cert-manager/pkg/controller/certificates/issuing"
	_ "github.com/cert-manager/cert-manager/pkg/controller/certificates/keymanager"
	_ "github.com/cert-manager/cert-manager/pkg/controller/certificates/readiness"
	_ "github.com/cert-manager/cert-manager/pkg/controller/certificates/requestmanager"
	_ "github.com/cert-manager/cert-manager/pkg/controller/certificates/revisionmanager"
	_ "github.com/cert-manager/cert-manager/pkg/controller/certificates/trigger"
	_ "github.com/cert-manager/cert-manager/pkg/controller/clusterissuers"
	_ "github.com/cert-manager/cert-manager/pkg/controller/issuers"
	// The issuer implementations the (Cluster)Issuer controllers look up.
	_ "github.com/cert-manager/cert-manager/pkg/issuer/ca"
	_ "github.com/cert-manager/cert-manager/pkg/issuer/selfsigned"
)

// The controllers this harness needs; anything else registered (metrics, shims) is left off.
var wanted = map[string]bool{
	"certificaterequests-approver":          true,
	"certificaterequests-issuer-ca":         true,
	"certificaterequests-issuer-selfsigned": true,
	"certificates-issuing":                  true,
	"certificates-key-manager":              true,
	"certificates-readiness":                true,
	"certificates-request-manager":          true,
	"certificates-revision-manager":         true,
	"certificates-trigger":                  true,
	"clusterissuers":                        true,
	"issuers":                               true,
}

func main() {
	kubeconfig := flag.String("kubeconfig", "", "kubeconfig of the API server")
	clusterResourceNamespace := flag.String("cluster-resource-namespace", "cert-manager",
		"namespace of the Secrets that ClusterIssuers name")
	flag.Parse()

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()

	opts := controller.ContextOptions{Kubeconfig: *kubeconfig}
	opts.IssuerOptions.ClusterResourceNamespace = *clusterResourceNamespace
	opts.CertificateOptions.CertificateRequestMinimumBackoffDuration = 5 * time.Second
	opts.CertificateOptions.CertificateRequestMaximumBackoffDuration = time.Minute
	factory, err := controller.NewContextFactory(ctx, opts)
	if err != nil {
		log.Fatalf("cert-manager: %v", err)
	}
	names := make([]string, 0, len(wanted))
	for name := range controller.Known() {
		if wanted[name] {
			names = append(names, name)
		}
	}
	sort.Strings(names)
	if len(names) != len(wanted) {
		log.Fatalf("cert-manager: found only the controllers %v of %d wanted", names, len(wanted))
	}
	done := make(chan error, len(names))
	for _, name := range names {
		ctrl, err := controller.Known()[name](factory)
		if err != nil {
			log.Fatalf("cert-manager: controller %s: %v", name, err)
		}
		go func(name string, ctrl controller.Interface) {
			log.Printf("cert-manager: starting %s", name)
			done <- ctrl.Run(2, ctx)
		}(name, ctrl)
	}
	// The controllers registered their informers on the factory's shared informer factories: start them.
	built, err := factory.Build()
	if err != nil {
		log.Fatalf("cert-manager: %v", err)
	}
	built.SharedInformerFactory.Start(ctx.Done())
	built.KubeSharedInformerFactory.Start(ctx.Done())
	built.HTTP01ResourceMetadataInformersFactory.Start(ctx.Done())
	log.Printf("cert-manager: running %v", names)
	for range names {
		if err := <-done; err != nil {
			log.Fatalf("cert-manager: %v", err)
		}
	}
}
