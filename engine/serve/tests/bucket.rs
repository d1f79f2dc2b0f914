//! A server over a repository in a bucket (moto on loopback), started in the test: a
//! key scoped to one namespace lists its own manifests and never another namespace's
//! name, whatever the bucket holds around them, while the admin pages through all.

mod common;

use std::sync::Arc;

use sealvol_s3repo::{Address, Mode, Options};
use sealvol_source::Endpoints;
use sealvol_testkit::servers::Moto;

#[test]
fn a_scoped_listing_on_a_bucket_names_no_other_namespace() {
    let tmp = tempfile::tempdir().unwrap();
    let moto = Moto::start(&[]);
    moto.seed(&["--bucket", "models"]);
    let state = tmp.path().join("state");
    sealvol_source::secrets::set(&state, "test", b"test:test").unwrap();
    let secret = sealvol_source::secrets::get(&state, "test").unwrap();
    let endpoints = Endpoints {
        s3: Some(moto.endpoint()),
        ..Endpoints::default()
    };
    let staging = tmp.path().join("staging");
    std::fs::create_dir_all(&staging).unwrap();
    let opts = Options {
        endpoints: &endpoints,
        secret: Some(&secret),
        staging: &staging,
        durable: false,
    };
    let address = Address::parse("s3://models/team").unwrap();
    sealvol_s3repo::open(&address, Mode::Init, &opts).unwrap();
    let mut keys = vec!["models".to_string(), "--keys".to_string()];
    for (ns, n) in [("aa", 3), ("zz-other", 1100)] {
        for i in 0..n {
            keys.push(format!("team/manifests/{ns}/model/{i:064x}=2"));
        }
    }
    let args: Vec<&str> = keys.iter().map(String::as_str).collect();
    moto.seed(&args);
    let repo = Arc::new(sealvol_s3repo::open(&address, Mode::Existing, &opts).unwrap());
    let served = common::listen(&repo, tmp.path(), false, sealvol_serve::Policy::default());
    let place = sealvol_serve::keys::Place::of(&served.keys_dir, Arc::clone(&repo)).unwrap();
    let aa = sealvol_serve::keys::create(&place, "aa", true, vec!["aa".into()]).unwrap();
    let get = |key: &str, path: &str| -> (u16, Vec<u8>) {
        served.rt.block_on(async {
            let r = reqwest::Client::new()
                .get(format!("{}{path}", served.url))
                .bearer_auth(key)
                .send()
                .await
                .unwrap();
            (r.status().as_u16(), r.bytes().await.unwrap().to_vec())
        })
    };
    let (status, body) = get(&aa, "/v1/list?prefix=manifests/");
    let text = String::from_utf8_lossy(&body);
    assert_eq!(status, 200, "{text}");
    assert!(
        !text.contains("zz-other"),
        "another namespace was named: {text:.300}"
    );
    let page: serde_json::Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(page["objects"].as_array().unwrap().len(), 3, "{page}");
    assert!(page["next"].is_null(), "{page}");
    // The admin, listing everything, pages through all of it.
    let (_, body) = get(&served.key, "/v1/list?prefix=manifests/");
    let page: serde_json::Value = serde_json::from_slice(&body).unwrap();
    assert!(page["next"].is_string(), "{page:.300}");
}
