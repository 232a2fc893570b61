package render

import (
	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"
)

// strictScheme is client-go's scheme plus CRDs, Gateway API's v1 kinds (the HTTPRoute) and the
// Prometheus Operator's (the ServiceMonitor and PrometheusRule of metrics.*), with a strict
// decoder: a field the API types don't have is an error, which catches template typos offline.
var (
	strictScheme  = newScheme()
	strictDecoder = serializer.NewCodecFactory(strictScheme, serializer.EnableStrict).UniversalDeserializer()
)

func newScheme() *runtime.Scheme {
	s := runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(s))
	utilruntime.Must(apiextensionsv1.AddToScheme(s))
	utilruntime.Must(gwv1.Install(s))
	utilruntime.Must(monitoringv1.AddToScheme(s))
	return s
}

// Scheme returns the scheme used for typed decoding (client-go kinds, CRDs, Gateway API, the
// Prometheus Operator's monitoring.coreos.com/v1).
func Scheme() *runtime.Scheme { return strictScheme }
