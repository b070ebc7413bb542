// Command client-go-peer runs client-go's own Reflector (cache.NewReflector,
// with every default the library has) on the resources named and prints what
// reaches its store as the same JSON lines as `kreflect -o jsonl`:
//
//	{"type":"ADDED"|"MODIFIED"|"DELETED","object":{...}}
//	{"type":"SYNCED","resource":"configmaps","resourceVersion":"N","count":N}
//
// so that the differential tests (tests/peers/) can fold both outputs the
// same way and the bench can run it as one more peer.
//
//	client-go-peer --server URL --certificate-authority CA --token-file FILE
//	    [--client-certificate CERT --client-key KEY] [-n NS] [-l SELECTOR] [-v N] RESOURCE...
//
// RESOURCE is a plural name of the core or apps group (configmaps, secrets,
// pods, deployments) or PLURAL.GROUP/VERSION for any other. The WatchListClient
// feature gate comes from client-go itself: KUBE_FEATURE_WatchListClient=true
// in the environment turns the watch-list on (client-go 0.32 defaults to off).
//
// The reflector feeds a store; this one is client-go's thread-safe store plus
// the lines: Add/Update/Delete print their event; Replace (the end of a LIST
// or of a watch-list's initial events) prints the difference against what was
// held before (ADDED, MODIFIED for a changed resourceVersion, DELETED), then
// SYNCED, as kreflect does after each (re)list. managedFields are dropped, as
// kreflect drops them.
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
)

var known = map[string]schema.GroupVersionResource{
	"configmaps":  {Version: "v1", Resource: "configmaps"},
	"secrets":     {Version: "v1", Resource: "secrets"},
	"pods":        {Version: "v1", Resource: "pods"},
	"deployments": {Group: "apps", Version: "v1", Resource: "deployments"},
}

func parseResource(s string) (schema.GroupVersionResource, error) {
	if gvr, ok := known[s]; ok {
		return gvr, nil
	}
	// PLURAL.GROUP/VERSION
	slash := strings.LastIndexByte(s, '/')
	dot := strings.IndexByte(s, '.')
	if slash < 0 || dot < 0 || dot > slash || slash == len(s)-1 {
		return schema.GroupVersionResource{}, fmt.Errorf("'%s' is neither a known resource nor PLURAL.GROUP/VERSION", s)
	}
	return schema.GroupVersionResource{Group: s[dot+1 : slash], Version: s[slash+1:], Resource: s[:dot]}, nil
}

// out serialises the lines of every resource's reflector onto stdout.
type out struct {
	mu   sync.Mutex
	w    *bufio.Writer
	kick chan struct{} // wakes the flusher: lines are waiting
}

// pending tells the flusher there is something to write, without blocking.
func (o *out) pending() {
	select {
	case o.kick <- struct{}{}:
	default:
	}
}

func (o *out) event(typ string, obj interface{}) {
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		if d, isTomb := obj.(cache.DeletedFinalStateUnknown); isTomb {
			u, ok = d.Obj.(*unstructured.Unstructured)
		}
		if !ok {
			klog.Errorf("client-go-peer: unable to print %T: not an object", obj)
			return
		}
	}
	c := u.DeepCopy()
	unstructured.RemoveNestedField(c.Object, "metadata", "managedFields")
	b, err := json.Marshal(struct {
		Type   string                 `json:"type"`
		Object map[string]interface{} `json:"object"`
	}{typ, c.Object})
	if err != nil {
		klog.Errorf("client-go-peer: unable to encode %s: %v", typ, err)
		return
	}
	o.mu.Lock()
	o.w.Write(b)
	o.w.WriteByte('\n')
	o.mu.Unlock()
	o.pending()
}

func (o *out) synced(resource, rv string, count int) {
	b, _ := json.Marshal(struct {
		Type            string `json:"type"`
		Resource        string `json:"resource"`
		ResourceVersion string `json:"resourceVersion"`
		Count           int    `json:"count"`
	}{"SYNCED", resource, rv, count})
	o.mu.Lock()
	o.w.Write(b)
	o.w.WriteByte('\n')
	o.w.Flush() // a sync is what readers wait for
	o.mu.Unlock()
}

func (o *out) flush() {
	o.mu.Lock()
	o.w.Flush()
	o.mu.Unlock()
}

// printingStore is the reflector's store: client-go's own, plus the lines.
type printingStore struct {
	cache.Store
	resource string
	o        *out
}

func rvOf(obj interface{}) string {
	if m, err := metaAccessor(obj); err == nil {
		return m.GetResourceVersion()
	}
	return ""
}

func metaAccessor(obj interface{}) (metav1.Object, error) {
	if u, ok := obj.(*unstructured.Unstructured); ok {
		return u, nil
	}
	return nil, fmt.Errorf("not an object: %T", obj)
}

// put is Add and Update: a watch may report an ADDED for an object already
// held (a re-watch that replays) and the store treats it as an update; the
// output says what the store did.
func (s *printingStore) put(obj interface{}, store func(interface{}) error) error {
	key, _ := cache.MetaNamespaceKeyFunc(obj)
	_, exists, _ := s.Store.GetByKey(key)
	if err := store(obj); err != nil {
		return err
	}
	if exists {
		s.o.event("MODIFIED", obj)
	} else {
		s.o.event("ADDED", obj)
	}
	return nil
}

func (s *printingStore) Add(obj interface{}) error    { return s.put(obj, s.Store.Add) }
func (s *printingStore) Update(obj interface{}) error { return s.put(obj, s.Store.Update) }

func (s *printingStore) Delete(obj interface{}) error {
	key, _ := cache.DeletionHandlingMetaNamespaceKeyFunc(obj)
	_, exists, _ := s.Store.GetByKey(key)
	if err := s.Store.Delete(obj); err != nil {
		return err
	}
	if exists {
		s.o.event("DELETED", obj)
	}
	return nil
}

func (s *printingStore) Replace(list []interface{}, rv string) error {
	before := map[string]interface{}{}
	for _, k := range s.Store.ListKeys() {
		if old, ok, _ := s.Store.GetByKey(k); ok {
			before[k] = old
		}
	}
	if err := s.Store.Replace(list, rv); err != nil {
		return err
	}
	for _, obj := range list {
		key, _ := cache.MetaNamespaceKeyFunc(obj)
		old, had := before[key]
		delete(before, key)
		switch {
		case !had:
			s.o.event("ADDED", obj)
		case rvOf(old) != rvOf(obj):
			s.o.event("MODIFIED", obj)
		}
	}
	for _, old := range before {
		s.o.event("DELETED", old)
	}
	s.o.synced(s.resource, rv, len(list))
	return nil
}

func main() {
	var server, caFile, tokenFile, certFile, keyFile, ns, selector string
	var insecure bool
	klogFlags := flag.NewFlagSet("klog", flag.ExitOnError)
	klog.InitFlags(klogFlags)
	flag.StringVar(&server, "server", "", "API server URL")
	flag.StringVar(&caFile, "certificate-authority", "", "CA bundle (PEM)")
	flag.StringVar(&tokenFile, "token-file", "", "bearer token file (re-read by client-go)")
	flag.StringVar(&certFile, "client-certificate", "", "client certificate (PEM), with --client-key")
	flag.StringVar(&keyFile, "client-key", "", "its key (PEM)")
	flag.StringVar(&ns, "n", "default", "namespace (\"\" = all)")
	flag.StringVar(&selector, "l", "", "label selector")
	flag.BoolVar(&insecure, "insecure-skip-tls-verify", false, "turn TLS verification off")
	v := flag.String("v", "0", "klog verbosity")
	flag.Parse()
	klogFlags.Set("v", *v)
	klogFlags.Set("logtostderr", "true")
	if server == "" || flag.NArg() == 0 {
		fmt.Fprintln(os.Stderr, "usage: client-go-peer --server URL [--certificate-authority CA] [--token-file F] [--client-certificate C --client-key K] [-n NS] [-l SEL] RESOURCE...")
		os.Exit(2)
	}
	cfg := &rest.Config{Host: server, BearerTokenFile: tokenFile,
		TLSClientConfig: rest.TLSClientConfig{CAFile: caFile, CertFile: certFile, KeyFile: keyFile,
			Insecure: insecure},
		UserAgent:       "client-go-peer"}
	dc, err := dynamic.NewForConfig(cfg)
	if err != nil {
		fmt.Fprintf(os.Stderr, "client-go-peer: unable to make a client: %v\n", err)
		os.Exit(1)
	}
	o := &out{w: bufio.NewWriterSize(os.Stdout, 64<<10), kick: make(chan struct{}, 1)}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for _, name := range flag.Args() {
		gvr, err := parseResource(name)
		if err != nil {
			fmt.Fprintf(os.Stderr, "client-go-peer: unable to watch %s\n", err)
			os.Exit(2)
		}
		ri := dc.Resource(gvr).Namespace(ns)
		lw := &cache.ListWatch{
			ListFunc: func(opts metav1.ListOptions) (runtime.Object, error) {
				opts.LabelSelector = selector
				return ri.List(context.TODO(), opts)
			},
			WatchFunc: func(opts metav1.ListOptions) (watch.Interface, error) {
				opts.LabelSelector = selector
				return ri.Watch(context.TODO(), opts)
			},
		}
		st := &printingStore{Store: cache.NewStore(cache.MetaNamespaceKeyFunc), resource: name, o: o}
		r := cache.NewReflector(lw, &unstructured.Unstructured{}, st, 0)
		wg.Add(1)
		go func() { defer wg.Done(); r.Run(stop) }()
	}
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
	go flusher(o, stop)
	<-sig
	close(stop)
	wg.Wait()
	o.flush()
}

// flusher writes out what the reflectors printed within 2 ms: the lines of
// a burst go out in one write, as kreflect writes once per pass of its loop
// rather than once per event. It wakes only when there is something to
// write, so an idle peer stays asleep (no ticker: the bench counts this
// process's wake-ups as client-go's).
func flusher(o *out, stop <-chan struct{}) {
	for {
		select {
		case <-o.kick:
			time.Sleep(2 * time.Millisecond)
			o.flush()
		case <-stop:
			return
		}
	}
}
