package main

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
	genericregistry "k8s.io/apiserver/pkg/registry/generic/registry"
	"k8s.io/apiserver/pkg/storage/names"
)

// resource is one served kind: its names, constructors and the few rules the
// real API server's strategies apply that a client can see.
type resource struct {
	plural, singular string
	short            []string // kubectl's short names (cm), from discovery
	namespaced       bool
	newObj, newList  func() runtime.Object
	prepare          func(obj runtime.Object) // defaults set on create
}

var resources = []resource{
	{
		plural: "configmaps", singular: "configmap", short: []string{"cm"}, namespaced: true,
		newObj:  func() runtime.Object { return &corev1.ConfigMap{} },
		newList: func() runtime.Object { return &corev1.ConfigMapList{} },
	},
	{
		plural: "secrets", singular: "secret", namespaced: true,
		newObj:  func() runtime.Object { return &corev1.Secret{} },
		newList: func() runtime.Object { return &corev1.SecretList{} },
		prepare: prepareSecret,
	},
	{
		plural: "namespaces", singular: "namespace", short: []string{"ns"}, namespaced: false,
		newObj:  func() runtime.Object { return &corev1.Namespace{} },
		newList: func() runtime.Object { return &corev1.NamespaceList{} },
		prepare: func(obj runtime.Object) {
			obj.(*corev1.Namespace).Status = corev1.NamespaceStatus{Phase: corev1.NamespaceActive}
		},
	},
}

// strategy is the create, update and delete strategy of one resource: the
// object's metadata is validated as the real server does (names, labels,
// annotations, immutable fields); the rest of the object is stored as sent.
type strategy struct {
	runtime.ObjectTyper
	r resource
}

func (s strategy) GenerateName(base string) string {
	return names.SimpleNameGenerator.GenerateName(base)
}
func (s strategy) NamespaceScoped() bool          { return s.r.namespaced }
func (s strategy) AllowCreateOnUpdate() bool      { return false }
func (s strategy) AllowUnconditionalUpdate() bool { return true }
func (s strategy) Canonicalize(runtime.Object)    {}

func (s strategy) PrepareForCreate(_ context.Context, obj runtime.Object) {
	if s.r.prepare != nil {
		s.r.prepare(obj)
	}
}

func (s strategy) PrepareForUpdate(_ context.Context, obj, old runtime.Object) {
	switch o := obj.(type) {
	case *corev1.Namespace:
		o.Status = old.(*corev1.Namespace).Status
	case *corev1.Secret:
		prepareSecret(o)
	}
}

// prepareSecret does what kube-apiserver's conversion of a Secret does on
// every write: stringData's keys are written into data (winning over data's)
// and stringData is never stored; the type defaults to Opaque.
func prepareSecret(obj runtime.Object) {
	s := obj.(*corev1.Secret)
	if s.Type == "" {
		s.Type = corev1.SecretTypeOpaque
	}
	if len(s.StringData) > 0 && s.Data == nil {
		s.Data = map[string][]byte{}
	}
	for k, v := range s.StringData {
		s.Data[k] = []byte(v)
	}
	s.StringData = nil
}

func (s strategy) nameRule() apivalidation.ValidateNameFunc {
	if s.r.namespaced {
		return apivalidation.NameIsDNSSubdomain
	}
	return apivalidation.ValidateNamespaceName
}

func (s strategy) Validate(_ context.Context, obj runtime.Object) field.ErrorList {
	m, err := meta.Accessor(obj)
	if err != nil {
		return field.ErrorList{field.InternalError(field.NewPath("metadata"), err)}
	}
	return apivalidation.ValidateObjectMetaAccessor(m, s.r.namespaced, s.nameRule(), field.NewPath("metadata"))
}

func (s strategy) ValidateUpdate(_ context.Context, obj, old runtime.Object) field.ErrorList {
	m, err := meta.Accessor(obj)
	if err != nil {
		return field.ErrorList{field.InternalError(field.NewPath("metadata"), err)}
	}
	o, err := meta.Accessor(old)
	if err != nil {
		return field.ErrorList{field.InternalError(field.NewPath("metadata"), err)}
	}
	return apivalidation.ValidateObjectMetaAccessorUpdate(m, o, field.NewPath("metadata"))
}

func (s strategy) WarningsOnCreate(context.Context, runtime.Object) []string { return nil }
func (s strategy) WarningsOnUpdate(context.Context, runtime.Object, runtime.Object) []string {
	return nil
}

// withShortNames adds the short names discovery lists (rest.ShortNamesProvider).
type withShortNames struct {
	*genericregistry.Store
	short []string
}

func (w withShortNames) ShortNames() []string { return w.short }
