// Command kube is the local cluster's Kubernetes components in one binary, chosen by the
// name it is run as (bin/kube-apiserver, bin/kubelet, ... are symbolic links to it):
// kube-apiserver, kube-controller-manager, kube-scheduler, kubelet, kube-proxy and
// kubectl of k8s.io/kubernetes v1.37.2. They share almost every package, so one link
// replaces six (make tools).
package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	_ "time/tzdata" // for CronJob time zones (kube-controller-manager, kube-apiserver)

	"github.com/spf13/cobra"
	_ "k8s.io/client-go/plugin/pkg/client/auth" // kubectl's client auth plugins
	"k8s.io/component-base/cli"
	"k8s.io/component-base/logs"
	_ "k8s.io/component-base/logs/json/register"          // JSON log format
	_ "k8s.io/component-base/metrics/prometheus/clientgo" // client-go metrics
	_ "k8s.io/component-base/metrics/prometheus/version"  // version metric
	kubectlcmd "k8s.io/kubectl/pkg/cmd"
	kubectlutil "k8s.io/kubectl/pkg/cmd/util"
	apiserver "k8s.io/kubernetes/cmd/kube-apiserver/app"
	controllermanager "k8s.io/kubernetes/cmd/kube-controller-manager/app"
	proxy "k8s.io/kubernetes/cmd/kube-proxy/app"
	scheduler "k8s.io/kubernetes/cmd/kube-scheduler/app"
	kubelet "k8s.io/kubernetes/cmd/kubelet/app"
)

// commands are the components, by the name the binary is run as.
var commands = map[string]func() *cobra.Command{
	"kube-apiserver":          apiserver.NewAPIServerCommand,
	"kube-controller-manager": controllermanager.NewControllerManagerCommand,
	"kube-scheduler":          func() *cobra.Command { return scheduler.NewSchedulerCommand() },
	"kubelet":                 func() *cobra.Command { return kubelet.NewKubeletCommand(context.Background()) },
	"kube-proxy":              proxy.NewProxyCommand,
}

func main() {
	name := filepath.Base(os.Args[0])
	if name == "kubectl" {
		// As cmd/kubectl: the verbosity is set before the command is built.
		logs.GlogSetter(kubectlcmd.GetLogVerbosity(os.Args)) //nolint:errcheck
		if err := cli.RunNoErrOutput(kubectlcmd.NewDefaultKubectlCommand()); err != nil {
			kubectlutil.CheckErr(err)
		}
		return
	}
	newCommand, ok := commands[name]
	if !ok {
		names := []string{"kubectl"}
		for n := range commands {
			names = append(names, n)
		}
		fmt.Fprintf(os.Stderr, "kube: run me as one of %s (a symbolic link of that name), not %q\n", strings.Join(names, ", "), name)
		os.Exit(2)
	}
	os.Exit(cli.Run(newCommand()))
}
