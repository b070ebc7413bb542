// Command kreflect-realapi-server is a small Kubernetes API server for
// kreflect's tests: the k8s.io/apiserver library's generic server, its generic
// registry store on etcd3 storage with the watch cache, serving core/v1
// configmaps, secrets and namespaces at /api/v1, over TLS, with bearer tokens
// from a CSV file (re-read when it changes) and client certificates.
// Everyone authenticated may do everything: no admission, no RBAC, no
// priority and fairness (see tests/realapi/README.md).
package main

import (
	"context"
	"flag"
	"fmt"
	"net"
	"os"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apiserver/pkg/authentication/authenticator"
	"k8s.io/apiserver/pkg/authentication/request/bearertoken"
	"k8s.io/apiserver/pkg/authentication/request/union"
	x509request "k8s.io/apiserver/pkg/authentication/request/x509"
	"k8s.io/apiserver/pkg/authorization/authorizerfactory"
	openapinamer "k8s.io/apiserver/pkg/endpoints/openapi"
	"k8s.io/apiserver/pkg/registry/generic"
	genericregistry "k8s.io/apiserver/pkg/registry/generic/registry"
	"k8s.io/apiserver/pkg/registry/rest"
	genericapiserver "k8s.io/apiserver/pkg/server"
	"k8s.io/apiserver/pkg/server/dynamiccertificates"
	"k8s.io/apiserver/pkg/server/options"
	"k8s.io/apiserver/pkg/storage/storagebackend"
	"k8s.io/apiserver/pkg/util/compatibility"
)

var (
	scheme = runtime.NewScheme()
	codecs = serializer.NewCodecFactory(scheme)
	v1     = schema.GroupVersion{Version: "v1"}
)

// The core/v1 Go types are the server's internal types too: the library then
// converts nothing between what it stores, caches and serves (runtime.Scheme
// sees that the wanted kind is the object's own and only sets its kind).
func init() {
	if err := corev1.AddToScheme(scheme); err != nil {
		panic(err)
	}
	internal := schema.GroupVersion{Version: runtime.APIVersionInternal}
	for _, r := range resources {
		scheme.AddKnownTypes(internal, r.newObj(), r.newList())
	}
}

type flags struct {
	bind, etcd, prefix, cert, key, tokens, clientCA string
	port                                            int
	watchCache                                      bool
	bench                                           benchWrites
	benchObjects                                    int
}

func main() {
	var f flags
	flag.StringVar(&f.bind, "bind-address", "127.0.0.1", "address to serve HTTPS on")
	flag.IntVar(&f.port, "secure-port", 6443, "port to serve HTTPS on")
	flag.StringVar(&f.etcd, "etcd-servers", "http://127.0.0.1:2379", "etcd client URLs, comma-separated")
	flag.StringVar(&f.prefix, "etcd-prefix", "/registry", "key prefix in etcd")
	flag.StringVar(&f.cert, "tls-cert-file", "", "serving certificate (PEM)")
	flag.StringVar(&f.key, "tls-private-key-file", "", "serving key (PEM)")
	flag.StringVar(&f.tokens, "token-auth-file", "", "CSV file: token,user,uid[,\"group1,group2\"] (re-read when it changes)")
	flag.StringVar(&f.clientCA, "client-ca-file", "", "CA bundle for client certificates (user: the CN)")
	flag.BoolVar(&f.watchCache, "watch-cache", true, "serve lists and watches from the watch cache")
	flag.StringVar(&f.bench.namespace, "bench-namespace", "bench", "test only: the namespace --bench-fill and --bench-modify write in")
	flag.IntVar(&f.bench.fill, "bench-fill", 0, "test only: create this many ConfigMaps through the store, then exit without serving")
	flag.IntVar(&f.bench.modify, "bench-modify", 0, "test only: update the ConfigMaps this many times in all, then exit without serving")
	flag.IntVar(&f.benchObjects, "bench-objects", 0, "test only: how many ConfigMaps --bench-modify updates (default: --bench-fill's)")
	flag.IntVar(&f.bench.bytes, "bench-bytes", 1024, "test only: the size of each ConfigMap's value")
	flag.IntVar(&f.bench.writers, "bench-writers", 32, "test only: concurrent writers")
	flag.Parse()
	if f.cert == "" || f.key == "" || (f.tokens == "" && f.clientCA == "") {
		fmt.Fprintln(os.Stderr, "kreflect-realapi-server: --tls-cert-file, --tls-private-key-file and --token-auth-file or --client-ca-file are required")
		os.Exit(2)
	}
	if f.bench.fill < 0 || f.bench.modify < 0 || f.benchObjects < 0 || f.bench.bytes < 0 || f.bench.writers < 1 {
		fmt.Fprintln(os.Stderr, "kreflect-realapi-server: --bench-fill, --bench-modify, --bench-objects and --bench-bytes cannot be negative, --bench-writers is at least 1")
		os.Exit(2)
	}
	ctx := genericapiserver.SetupSignalContext()
	if err := run(ctx, f); err != nil {
		fmt.Fprintln(os.Stderr, "kreflect-realapi-server:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, f flags) error {
	config := genericapiserver.NewConfig(codecs)
	config.EffectiveVersion = compatibility.DefaultBuildEffectiveVersion()
	config.OpenAPIV3Config = genericapiserver.DefaultOpenAPIV3Config(openAPIDefinitions, openapinamer.NewDefinitionNamer(scheme))

	serving := options.NewSecureServingOptions().WithLoopback()
	serving.BindAddress = net.ParseIP(f.bind)
	serving.BindPort = f.port
	serving.ServerCert.CertKey.CertFile = f.cert
	serving.ServerCert.CertKey.KeyFile = f.key
	if err := serving.ApplyTo(&config.SecureServing, &config.LoopbackClientConfig); err != nil {
		return err
	}

	var authns []authenticator.Request
	if f.tokens != "" {
		tokens, err := newTokenFile(f.tokens)
		if err != nil {
			return err
		}
		authns = append(authns, bearertoken.New(tokens))
	}
	if f.clientCA != "" {
		ca, err := dynamiccertificates.NewDynamicCAContentFromFile("client-ca", f.clientCA)
		if err != nil {
			return err
		}
		if err := config.Authentication.ApplyClientCert(ca, config.SecureServing); err != nil {
			return err
		}
		authns = append(authns, x509request.NewDynamic(ca.VerifyOptions, x509request.CommonNameUserConversion))
	}
	config.Authentication.Authenticator = union.New(authns...)
	config.Authorization.Authorizer = authorizerfactory.NewAlwaysAllowAuthorizer()
	// The loopback client's own token (the library's post-start hooks use it).
	genericapiserver.AuthorizeClientBearerToken(config.LoopbackClientConfig, &config.Authentication, &config.Authorization)

	etcd := options.NewEtcdOptions(storagebackend.NewDefaultConfig(f.prefix, codecs.LegacyCodec(v1)))
	etcd.StorageConfig.Transport.ServerList = strings.Split(f.etcd, ",")
	etcd.EnableWatchCache = f.watchCache
	if err := etcd.ApplyTo(config); err != nil {
		return err
	}

	server, err := config.Complete(nil).New("kreflect-realapi-server", genericapiserver.NewEmptyDelegate())
	if err != nil {
		return err
	}
	storage := map[string]rest.Storage{}
	for _, r := range resources {
		s, err := r.store(scheme, config.RESTOptionsGetter)
		if err != nil {
			return err
		}
		storage[r.plural] = withShortNames{s, r.short}
		if r.plural == "configmaps" && f.bench.wanted() {
			return f.bench.run(ctx, s, f.benchObjects)
		}
	}
	group := genericapiserver.NewDefaultAPIGroupInfo("", scheme, runtime.NewParameterCodec(scheme), codecs)
	group.VersionedResourcesStorageMap["v1"] = storage
	if err := server.InstallLegacyAPIGroup(genericapiserver.DefaultLegacyAPIPrefix, &group); err != nil {
		return err
	}
	return server.PrepareRun().RunWithContext(ctx)
}

// store is the library's generic registry store for one resource.
func (r resource) store(typer runtime.ObjectTyper, getter generic.RESTOptionsGetter) (*genericregistry.Store, error) {
	s := strategy{typer, r}
	store := &genericregistry.Store{
		NewFunc:                   r.newObj,
		NewListFunc:               r.newList,
		DefaultQualifiedResource:  schema.GroupResource{Resource: r.plural},
		SingularQualifiedResource: schema.GroupResource{Resource: r.singular},
		CreateStrategy:            s,
		UpdateStrategy:            s,
		DeleteStrategy:            s,
		TableConvertor:            rest.NewDefaultTableConvertor(schema.GroupResource{Resource: r.plural}),
	}
	if err := store.CompleteWithOptions(&generic.StoreOptions{RESTOptions: getter}); err != nil {
		return nil, err
	}
	return store, nil
}
