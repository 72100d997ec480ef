// Runs Kubeflow's MPI Operator (MPIJob v2beta1) out of cluster with Volcano gang scheduling,
// the way its own main does (github.com/kubeflow/mpi-operator/cmd/mpi-operator), with two
// differences that only concern the process: no leader election (one operator runs) and no
// health-check listener (the operator's main binds it on every interface at a fixed port,
// where tests listen on 127.0.0.1 only). The controller, its PodGroup handling and its
// defaults are the operator's own, unchanged.
package main

import (
	"context"
	"flag"
	"os"
	"os/signal"
	"syscall"

	kubeinformers "k8s.io/client-go/informers"
	kubeclientset "k8s.io/client-go/kubernetes"
	clientgokubescheme "k8s.io/client-go/kubernetes/scheme"
	restclientset "k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog"
	volcanoclient "volcano.sh/apis/pkg/client/clientset/versioned"

	"github.com/kubeflow/mpi-operator/cmd/mpi-operator/app/options"
	mpijobclientset "github.com/kubeflow/mpi-operator/pkg/client/clientset/versioned"
	kubeflowscheme "github.com/kubeflow/mpi-operator/pkg/client/clientset/versioned/scheme"
	informers "github.com/kubeflow/mpi-operator/pkg/client/informers/externalversions"
	controllersv1 "github.com/kubeflow/mpi-operator/pkg/controller"
)

func main() {
	kubeconfig := flag.String("kubeconfig", os.Getenv("KUBECONFIG"), "kubeconfig of the cluster")
	threads := flag.Int("threadiness", 2, "workers of the controller, as the operator's flag")
	klog.InitFlags(nil)
	flag.Parse()

	cfg, err := clientcmd.BuildConfigFromFlags("", *kubeconfig)
	if err != nil {
		klog.Fatalf("kubeconfig: %v", err)
	}
	// The operator's defaults for its --kube-api-qps and --kube-api-burst.
	cfg.QPS, cfg.Burst = 5, 10
	kubeClient := kubeclientset.NewForConfigOrDie(restclientset.AddUserAgent(cfg, "mpi-operator"))
	mpiClient := mpijobclientset.NewForConfigOrDie(cfg)
	volcanoClient := volcanoclient.NewForConfigOrDie(restclientset.AddUserAgent(cfg, "volcano"))
	if err := kubeflowscheme.AddToScheme(clientgokubescheme.Scheme); err != nil {
		klog.Fatalf("scheme: %v", err)
	}

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	kubeInformers := kubeinformers.NewSharedInformerFactory(kubeClient, 0)
	kubeflowInformers := informers.NewSharedInformerFactory(mpiClient, 0)
	controller, err := controllersv1.NewMPIJobController(
		kubeClient, mpiClient, volcanoClient, nil,
		kubeInformers.Core().V1().ConfigMaps(),
		kubeInformers.Core().V1().Secrets(),
		kubeInformers.Core().V1().Services(),
		kubeInformers.Batch().V1().Jobs(),
		kubeInformers.Core().V1().Pods(),
		kubeInformers.Scheduling().V1().PriorityClasses(),
		kubeflowInformers.Kubeflow().V2beta1().MPIJobs(),
		"", options.GangSchedulerVolcano)
	if err != nil {
		klog.Fatalf("controller: %v", err)
	}
	go kubeInformers.Start(ctx.Done())
	go kubeflowInformers.Start(ctx.Done())
	if controller.PodGroupCtrl != nil {
		controller.PodGroupCtrl.StartInformerFactory(ctx.Done())
	}
	klog.Info("mpi-operator controller started (gang scheduling: volcano)")
	if err := controller.Run(*threads, ctx.Done()); err != nil {
		klog.Fatalf("controller: %v", err)
	}
}
