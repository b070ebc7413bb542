package main

import (
	"reflect"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/version"
	"k8s.io/kube-openapi/pkg/common"
	"k8s.io/kube-openapi/pkg/util"
	"k8s.io/kube-openapi/pkg/validation/spec"
)

// openAPIDefinitions gives every type the server names an OpenAPI model that
// keeps whatever fields it is sent (x-kubernetes-preserve-unknown-fields), as
// a CustomResourceDefinition without a schema does. The library needs a model
// per served kind for server-side apply's field tracking (managedFields); the
// generated models of the core types live in kubernetes itself, not in these
// libraries. Clients see the same objects; managedFields record whole fields
// at the top level only.
func openAPIDefinitions(common.ReferenceCallback) map[string]common.OpenAPIDefinition {
	defs := map[string]common.OpenAPIDefinition{}
	add := func(t reflect.Type) {
		for t.Kind() == reflect.Ptr {
			t = t.Elem()
		}
		defs[util.GetCanonicalTypeName(reflect.New(t).Interface())] = common.OpenAPIDefinition{Schema: spec.Schema{
			SchemaProps:      spec.SchemaProps{Type: []string{"object"}},
			VendorExtensible: spec.VendorExtensible{Extensions: spec.Extensions{"x-kubernetes-preserve-unknown-fields": true}},
		}}
	}
	for _, t := range scheme.AllKnownTypes() {
		add(t)
	}
	for _, o := range []interface{}{&metav1.Patch{}, &metav1.Status{}, &metav1.APIResourceList{}, &metav1.WatchEvent{}, &version.Info{}} {
		add(reflect.TypeOf(o))
	}
	return defs
}
