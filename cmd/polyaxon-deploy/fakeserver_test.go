package main

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kversion "k8s.io/apimachinery/pkg/version"
	fakediscovery "k8s.io/client-go/discovery/fake"
	"k8s.io/client-go/kubernetes/fake"
)

// fakeServer makes a fake clientset's discovery answer like a kube-apiserver of version that
// serves admissionregistration.k8s.io/v1 (with the MutatingAdmissionPolicy kinds when
// policies), so commands render for it as Helm would.
func fakeServer(cs *fake.Clientset, version string, policies bool) {
	d := cs.Discovery().(*fakediscovery.FakeDiscovery)
	d.FakedServerVersion = &kversion.Info{GitVersion: version, Major: "1", Minor: version[3:5]}
	res := []metav1.APIResource{{Name: "validatingwebhookconfigurations", Kind: "ValidatingWebhookConfiguration"}}
	if policies {
		res = append(res,
			metav1.APIResource{Name: "mutatingadmissionpolicies", Kind: "MutatingAdmissionPolicy"},
			metav1.APIResource{Name: "mutatingadmissionpolicybindings", Kind: "MutatingAdmissionPolicyBinding"})
	}
	d.Resources = []*metav1.APIResourceList{
		{GroupVersion: "v1", APIResources: []metav1.APIResource{{Name: "pods", Namespaced: true, Kind: "Pod"}}},
		{GroupVersion: "admissionregistration.k8s.io/v1", APIResources: res},
	}
}
