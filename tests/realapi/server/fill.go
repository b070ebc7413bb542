package main

// Test-only bulk writes for tests/realapi/bench.py: with --bench-fill or
// --bench-modify the program does not serve; it writes ConfigMaps straight
// through the generic registry store (the same strategy, validation and etcd3
// storage a POST or PUT goes through, without HTTP, TLS and JSON decoding),
// from --bench-writers goroutines, prints what it did and exits. 100,000
// objects written over HTTPS one request each took minutes; this takes
// seconds, and the serving processes' watch caches see every write from etcd.

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	genericapirequest "k8s.io/apiserver/pkg/endpoints/request"
	genericregistry "k8s.io/apiserver/pkg/registry/generic/registry"
	"k8s.io/apiserver/pkg/registry/rest"
)

type benchWrites struct {
	namespace      string
	fill, modify   int // ConfigMaps cm-000000.. to create; updates spread over them
	bytes, writers int
}

func (b benchWrites) wanted() bool { return b.fill > 0 || b.modify > 0 }

func benchName(i int) string { return fmt.Sprintf("cm-%06d", i) }

// benchObject is ConfigMap i with one key of b.bytes bytes; round makes each
// update's value differ from the last.
func (b benchWrites) object(i, round int) *corev1.ConfigMap {
	tag := fmt.Sprintf("%d-%d-", i, round)
	v := tag + strings.Repeat("x", max(0, b.bytes-len(tag)))
	return &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: benchName(i), Namespace: b.namespace},
		Data:       map[string]string{"k": v},
	}
}

// each runs fn(j) for j in [0, n) on b.writers goroutines; the first error wins.
func (b benchWrites) each(n int, fn func(j int) error) error {
	var next atomic.Int64
	var first error
	var once sync.Once
	var wg sync.WaitGroup
	for w := 0; w < max(1, b.writers); w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				j := int(next.Add(1) - 1)
				if j >= n {
					return
				}
				if err := fn(j); err != nil {
					once.Do(func() { first = err })
					next.Store(int64(n))
					return
				}
			}
		}()
	}
	wg.Wait()
	return first
}

// run creates b.fill ConfigMaps, then makes b.modify updates over the
// b.fill (or, when 0, the existing count given by --bench-objects) objects.
func (b benchWrites) run(ctx context.Context, s *genericregistry.Store, objects int) error {
	ctx = genericapirequest.WithNamespace(ctx, b.namespace)
	if b.fill > 0 {
		t0 := time.Now()
		err := b.each(b.fill, func(i int) error {
			_, err := s.Create(ctx, b.object(i, 0), rest.ValidateAllObjectFunc, &metav1.CreateOptions{})
			return err
		})
		if err != nil {
			return fmt.Errorf("bench fill: %w", err)
		}
		fmt.Printf("created %d configmaps in %s in %.2f s\n", b.fill, b.namespace, time.Since(t0).Seconds())
		objects = b.fill
	}
	if b.modify > 0 {
		if objects <= 0 {
			return fmt.Errorf("bench modify: --bench-objects or --bench-fill must say how many objects exist")
		}
		t0 := time.Now()
		err := b.each(b.modify, func(j int) error {
			obj := b.object(j%objects, 1+j/objects)
			_, _, err := s.Update(ctx, obj.Name, rest.DefaultUpdatedObjectInfo(obj), rest.ValidateAllObjectFunc,
				rest.ValidateAllObjectUpdateFunc, false, &metav1.UpdateOptions{})
			return err
		})
		if err != nil {
			return fmt.Errorf("bench modify: %w", err)
		}
		fmt.Printf("updated %d times in %s in %.2f s\n", b.modify, b.namespace, time.Since(t0).Seconds())
	}
	return nil
}
