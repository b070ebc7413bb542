// A peer for `make bench`: the reflector a Node.js user would write with
// @kubernetes/client-node 1.4.x, printing the same JSON lines as kreflect.
//
//   node tests/bench/peer_node.js --modules DIR --server URL --certificate-authority CA
//        --token-file PATH [-n NS] [--once]
//
// DIR is the npm prefix the bench installed the client into (build/bench). It
// runs makeInformer on ConfigMaps in one namespace: the informer lists, then
// watches from the list's resourceVersion, re-watches after a clean end and
// relists after 410. Every add/update/delete is printed as
// {"type":"ADDED|MODIFIED|DELETED","object":{...}} and, once informer.start()
// has resolved (list applied, watch open: the informer's only "synced" signal),
// {"type":"SYNCED","resource":"configmaps","resourceVersion":"...","count":N}.
// --once exits 0 right after that line. Each list it makes is a line on stderr,
// "peer_node: listed N objects at resourceVersion RV".
//
// As kreflect does, objects are kept and printed without metadata.managedFields
// and list items get the kind and apiVersion that typed lists leave out: the
// informer's cache then holds what kreflect's store holds.
'use strict';

const fs = require('node:fs');
const path = require('node:path');
const { createRequire } = require('node:module');
const { pathToFileURL } = require('node:url');

function usage(msg) {
    process.stderr.write(`peer_node: ${msg}\n`);
    process.exit(2);
}

function parseArgs(argv) {
    const o = { namespace: 'default', once: false };
    const takes = { '--modules': 'modules', '--server': 'server', '--certificate-authority': 'ca',
        '--token-file': 'tokenFile', '-n': 'namespace', '--namespace': 'namespace' };
    for (let i = 0; i < argv.length; i++) {
        const a = argv[i];
        if (a === '--once') {
            o.once = true;
        } else if (takes[a] !== undefined) {
            if (i + 1 >= argv.length) usage(`${a} needs a value`);
            o[takes[a]] = argv[++i];
        } else {
            usage(`unknown argument ${JSON.stringify(a)}`);
        }
    }
    for (const k of ['modules', 'server', 'ca', 'tokenFile']) {
        if (!o[k]) usage(`missing --${k === 'ca' ? 'certificate-authority' : k.replace('File', '-file')}`);
    }
    return o;
}

async function main() {
    const o = parseArgs(process.argv.slice(2));
    const req = createRequire(path.join(path.resolve(o.modules), 'package.json'));
    const k8s = await import(pathToFileURL(req.resolve('@kubernetes/client-node')).href);
    const token = fs.readFileSync(o.tokenFile, 'utf8').trim();

    const kc = new k8s.KubeConfig();
    kc.loadFromOptions({
        // client-node refuses http:// unless told to skip TLS verification: there is no
        // TLS on a plain local endpoint (kreflect --listen), so nothing is skipped.
        clusters: [{ name: 'bench', server: o.server, caFile: o.ca,
            skipTLSVerify: o.server.startsWith('http://') }],
        users: [{ name: 'bench', token }],
        contexts: [{ name: 'bench', cluster: 'bench', user: 'bench', namespace: o.namespace }],
        currentContext: 'bench',
    });
    const api = kc.makeApiClient(k8s.CoreV1Api);
    // Every list the informer makes (its first, and one after each 410) is named on
    // stderr, so a test can count them: SYNCED comes once, after the first.
    const list = async () => {
        const l = await api.listNamespacedConfigMap({ namespace: o.namespace });
        process.stderr.write(`peer_node: listed ${l.items.length} objects at resourceVersion `
            + `${l.metadata ? l.metadata.resourceVersion : ''}\n`);
        return l;
    };
    const informer = k8s.makeInformer(kc, `/api/v1/namespaces/${o.namespace}/configmaps`, list);

    const print = (type, obj) => {
        if (obj.metadata) delete obj.metadata.managedFields;
        if (obj.kind === undefined) obj.kind = 'ConfigMap';
        if (obj.apiVersion === undefined) obj.apiVersion = 'v1';
        process.stdout.write(JSON.stringify({ type, object: obj }) + '\n');
    };
    informer.on('add', (obj) => print('ADDED', obj));
    informer.on('update', (obj) => print('MODIFIED', obj));
    informer.on('delete', (obj) => print('DELETED', obj));
    // start() resolves after the list was applied and the watch opened, or
    // after an error was reported: only the first case is a sync.
    let synced = false;
    let failed = null;
    informer.on('error', (err) => {
        process.stderr.write(`peer_node: ${err && err.message ? err.message : err}\n`);
        failed = err;
        if (synced) setTimeout(() => informer.start().catch(() => {}), 1000);
    });
    for (;;) {
        failed = null;
        await informer.start();
        if (failed === null) break;
        await new Promise((resolve) => setTimeout(resolve, 1000));
    }
    synced = true;
    // A pipe is written asynchronously once it is full: --once exits when the
    // SYNCED line has gone out, not before.
    process.stdout.write(JSON.stringify({ type: 'SYNCED', resource: 'configmaps',
        resourceVersion: informer.latestResourceVersion(), count: informer.list(o.namespace).length }) + '\n',
    () => { if (o.once) process.exit(0); });
}

main().catch((err) => {
    process.stderr.write(`peer_node: ${err && err.stack ? err.stack : err}\n`);
    process.exit(1);
});
