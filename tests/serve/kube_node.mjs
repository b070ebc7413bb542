// @kubernetes/client-node as a user would point it at kreflect's --listen: its own
// kubeconfig loading (KubeConfig.loadFromFile), a list, then a Watch with bookmarks.
//
//   node tests/serve/kube_node.mjs MODULES KUBECONFIG NAMESPACE FORBIDDEN_NAMESPACE
//
// MODULES is the npm prefix client-node is installed in (make test-deps: build/bench/npm).
// The JSON lines are those of tests/serve/kube_python.py:
//   {"op":"forbidden-list","code":403,"status":{the Status body}}
//   {"op":"forbidden-watch","code":403}   (client-node's Watch gives the code, not the body)
//   {"op":"list","resourceVersion":RV,"items":{name: RV}}
//   {"op":"event","type":T,"name":N,"resourceVersion":RV,"annotations":{...}}
//        (an ERROR event has "status": its Status; client-node passes it on as an event)
//   {"op":"end","error":WHY}   when the watch's done callback runs (null: a clean end)
import path from 'node:path';
import { createRequire } from 'node:module';
import { pathToFileURL } from 'node:url';

const say = (o) => process.stdout.write(JSON.stringify(o) + '\n');

const [modules, kubeconfig, ns, forbidden] = process.argv.slice(2);
const req = createRequire(path.join(path.resolve(modules), 'package.json'));
const k8s = await import(pathToFileURL(req.resolve('@kubernetes/client-node')).href);

const kc = new k8s.KubeConfig();
kc.loadFromFile(kubeconfig);
const api = kc.makeApiClient(k8s.CoreV1Api);

try {
    await api.listNamespacedConfigMap({ namespace: forbidden });
    say({ op: 'forbidden-list', code: 'none' });
} catch (err) {
    let body = err.body;
    try {
        body = typeof body === 'string' ? JSON.parse(body) : body;
    } catch {
        // kept as the text it is
    }
    say({ op: 'forbidden-list', code: err.code === undefined ? String(err) : err.code, status: body });
}

const watch = new k8s.Watch(kc);
const forbiddenWatch = await new Promise((resolve) => {
    watch.watch(`/api/v1/namespaces/${forbidden}/configmaps`, { timeoutSeconds: 5 },
        () => {}, (err) => resolve(err ? err.statusCode || String(err) : 'none'));
});
say({ op: 'forbidden-watch', code: forbiddenWatch });

const list = await api.listNamespacedConfigMap({ namespace: ns });
const rv = list.metadata.resourceVersion;
const items = {};
for (const o of list.items) items[o.metadata.name] = o.metadata.resourceVersion;
say({ op: 'list', resourceVersion: rv, items });

await watch.watch(`/api/v1/namespaces/${ns}/configmaps`, { resourceVersion: rv, allowWatchBookmarks: true },
    (type, obj) => {
        const md = (obj && obj.metadata) || {};
        say({ op: 'event', type, name: md.name, resourceVersion: md.resourceVersion,
            annotations: md.annotations || {}, status: type === 'ERROR' ? obj : undefined });
    },
    (err) => {
        say({ op: 'end', error: err ? String(err.message || err) : null });
        process.exit(0);
    });
