//! A key scoped to namespaces lists a kind's folder (`manifests/`) page by page without
//! ever being sent a key of another namespace: not in a page, and not as the page's
//! `next` (a store's next is the last key it listed, which on a bucket with another
//! namespace's thousands of versions would name one of them). On the in-memory store,
//! which pages at 1,000 keys as S3 does.

use std::sync::Arc;

use sealvol_core::repo::Repository;
use sealvol_core::store::MemoryStore;
use sealvol_serve::ChunkService;
use sealvol_wire::objects::ListPage;

struct Listing {
    rt: tokio::runtime::Runtime,
    url: String,
    repo: Arc<Repository>,
    keys_dir: tempfile::TempDir,
}

fn server() -> Listing {
    let mem = Arc::new(MemoryStore::new().unwrap());
    let repo = Arc::new(Repository::open(Box::new(mem), "memory".into(), true).unwrap());
    let keys_dir = tempfile::tempdir().unwrap();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let listener = rt
        .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
        .unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let (keys, _) =
        sealvol_serve::keys::Keys::open(keys_dir.path(), Some(Arc::clone(&repo))).unwrap();
    let service = Arc::new(ChunkService::new(Arc::clone(&repo), None));
    rt.spawn(sealvol_serve::run(listener, service, keys, None));
    Listing {
        rt,
        url,
        repo,
        keys_dir,
    }
}

impl Listing {
    fn key(&self, name: &str, namespaces: &[&str]) -> String {
        let place =
            sealvol_serve::keys::Place::of(self.keys_dir.path(), Arc::clone(&self.repo)).unwrap();
        let ns = namespaces.iter().map(|s| s.to_string()).collect();
        sealvol_serve::keys::create(&place, name, true, ns).unwrap()
    }

    /// `count` manifests (their bytes do not matter to a listing) of namespace `ns`.
    fn versions(&self, ns: &str, count: usize) {
        for i in 0..count {
            let key = format!("manifests/{ns}/model/{:064x}", i);
            self.repo.object_store().put(&key, b"{}").unwrap();
        }
    }

    /// Every page of `prefix` as `key` lists it.
    fn pages(&self, key: &str, prefix: &str) -> Vec<ListPage> {
        let mut out = Vec::new();
        let mut after: Option<String> = None;
        loop {
            let mut url = format!("{}/v1/list?prefix={prefix}", self.url);
            if let Some(a) = &after {
                url.push_str(&format!("&after={a}"));
            }
            let key = key.to_string();
            let (status, body) = self.rt.block_on(async move {
                let r = reqwest::Client::new()
                    .get(url)
                    .bearer_auth(key)
                    .send()
                    .await
                    .unwrap();
                (r.status().as_u16(), r.bytes().await.unwrap().to_vec())
            });
            assert_eq!(status, 200, "{}", String::from_utf8_lossy(&body));
            let page: ListPage = serde_json::from_slice(&body).unwrap();
            after = page.next.clone();
            out.push(page);
            if after.is_none() {
                return out;
            }
            assert!(out.len() < 100, "the listing does not end");
        }
    }
}

#[test]
fn a_scoped_listing_never_names_another_namespace_not_even_as_next() {
    let l = server();
    l.versions("aa", 3);
    l.versions("mm", 1200);
    l.versions("zz-other", 2500);
    for (namespaces, want) in [
        (vec!["aa"], 3),
        (vec!["mm", "aa"], 1203),
        (vec!["mm"], 1200),
    ] {
        let key = l.key(&namespaces.join("-"), &namespaces);
        let pages = l.pages(&key, "manifests/");
        let mut seen = Vec::new();
        for p in &pages {
            for (k, _, _) in &p.objects {
                seen.push(k.clone());
            }
            if let Some(next) = &p.next {
                assert!(
                    namespaces
                        .iter()
                        .any(|ns| next.starts_with(&format!("manifests/{ns}/"))),
                    "next names another namespace: {next}"
                );
            }
        }
        assert!(
            seen.iter().all(|k| namespaces
                .iter()
                .any(|ns| k.starts_with(&format!("manifests/{ns}/")))),
            "another namespace was listed"
        );
        let mut unique = seen.clone();
        unique.sort();
        unique.dedup();
        assert_eq!((seen.len(), unique.len()), (want, want), "{namespaces:?}");
    }
    // A made-up `after` in another namespace is refused, not followed.
    let key = l.key("only-aa", &["aa"]);
    let url = format!(
        "{}/v1/list?prefix=manifests/&after=manifests/zz-other/model/{:064x}",
        l.url, 5
    );
    let status = l.rt.block_on(async move {
        reqwest::Client::new()
            .get(url)
            .bearer_auth(key)
            .send()
            .await
            .unwrap()
            .status()
            .as_u16()
    });
    assert_eq!(status, 400);
    // Keys that see every namespace list as before, page by page.
    let all = l.key("all", &[]);
    let n: usize = l
        .pages(&all, "manifests/")
        .iter()
        .map(|p| p.objects.len())
        .sum();
    assert_eq!(n, 3703);
}
