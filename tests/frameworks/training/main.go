// Runs Kubeflow's training operator (PyTorchJob) out of cluster with Volcano gang scheduling,
// the way its own main does (github.com/kubeflow/training-operator/cmd/training-operator.v1),
// with two differences that only concern the process: no webhook server (its validating
// webhook is not registered with the API server in these tests, and the operator's main binds
// it on every interface, where tests listen on 127.0.0.1 only) and so no certificate rotation,
// which exists for that server alone; and no metrics or probe listeners. The reconcilers, the
// PodGroup handling and the defaulting are the operator's own, unchanged.
package main

import (
	"flag"
	"os"

	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"volcano.sh/apis/pkg/apis/scheduling/v1beta1"
	volcanoclient "volcano.sh/apis/pkg/client/clientset/versioned"

	kubeflowv1 "github.com/kubeflow/training-operator/pkg/apis/kubeflow.org/v1"
	"github.com/kubeflow/training-operator/pkg/config"
	controllerv1 "github.com/kubeflow/training-operator/pkg/controller.v1"
	"github.com/kubeflow/training-operator/pkg/controller.v1/common"
)

func main() {
	var scheme = runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(scheme))
	utilruntime.Must(kubeflowv1.AddToScheme(scheme))
	utilruntime.Must(v1beta1.AddToScheme(scheme))

	var gangSchedulerName string
	var enabledSchemes controllerv1.EnabledSchemes
	flag.StringVar(&gangSchedulerName, "gang-scheduler-name", "volcano", "only volcano is wired here")
	flag.Var(&enabledSchemes, "enable-scheme", "scheme(s) to run, as the operator's flag (default: pytorchjob)")
	// The operator's own flags for what its pods are made of, with its defaults.
	flag.StringVar(&config.Config.PyTorchInitContainerImage, "pytorch-init-container-image",
		config.PyTorchInitContainerImageDefault, "the image of the PyTorch workers' init container")
	flag.StringVar(&config.Config.PyTorchInitContainerTemplateFile, "pytorch-init-container-template-file",
		config.PyTorchInitContainerTemplateFileDefault, "the template of the PyTorch workers' init container")
	flag.IntVar(&config.Config.PyTorchInitContainerMaxTries, "pytorch-init-container-max-tries",
		config.PyTorchInitContainerMaxTriesDefault, "the tries of the PyTorch workers' init container")
	flag.StringVar(&config.Config.MPIKubectlDeliveryImage, "mpi-kubectl-delivery-image",
		config.MPIKubectlDeliveryImageDefault, "the image of the MPI launcher's init container")
	opts := zap.Options{Development: true}
	opts.BindFlags(flag.CommandLine)
	flag.Parse()
	ctrl.SetLogger(zap.New(zap.UseFlagOptions(&opts)))
	log := ctrl.Log.WithName("setup")
	if gangSchedulerName != "volcano" {
		log.Info("only --gang-scheduler-name=volcano is wired in this runner")
		os.Exit(2)
	}
	if enabledSchemes.Empty() {
		enabledSchemes = controllerv1.EnabledSchemes{kubeflowv1.PyTorchJobKind}
	}

	cfg := ctrl.GetConfigOrDie()
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:                 scheme,
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
	})
	if err != nil {
		log.Error(err, "unable to start manager")
		os.Exit(1)
	}
	setup := common.GenVolcanoSetupFunc(volcanoclient.NewForConfigOrDie(cfg))
	for _, s := range enabledSchemes {
		reconciler, ok := controllerv1.SupportedSchemeReconciler[s]
		if !ok {
			log.Info("scheme is not supported", "scheme", s)
			os.Exit(2)
		}
		if err := reconciler(mgr, setup, 1); err != nil {
			log.Error(err, "unable to create controller", "scheme", s)
			os.Exit(1)
		}
	}
	log.Info("starting manager", "schemes", enabledSchemes, "gangScheduler", gangSchedulerName)
	if err := mgr.Start(ctrl.SetupSignalHandler()); err != nil {
		log.Error(err, "problem running manager")
		os.Exit(1)
	}
}
