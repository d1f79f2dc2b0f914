//! The media types of the CNCF ModelPack spec (`modelpack/model-spec`,
//! `specs-go/v1/mediatype.go`), and which one a file of a version is exported as. Every
//! file is one raw layer (its bytes as they are: weights are incompressible, and a
//! raw layer is read in place); its kind is told by its name alone, so the same
//! version always gives the same manifest.

pub const OCI_MANIFEST: &str = "application/vnd.oci.image.manifest.v1+json";
pub const OCI_INDEX: &str = "application/vnd.oci.image.index.v1+json";
pub const MODEL_MANIFEST: &str = "application/vnd.cncf.model.manifest.v1+json";
pub const MODEL_CONFIG: &str = "application/vnd.cncf.model.config.v1+json";

pub const WEIGHT: &str = "application/vnd.cncf.model.weight.v1.raw";
pub const WEIGHT_CONFIG: &str = "application/vnd.cncf.model.weight.config.v1.raw";
pub const DOC: &str = "application/vnd.cncf.model.doc.v1.raw";
pub const CODE: &str = "application/vnd.cncf.model.code.v1.raw";
pub const DATASET: &str = "application/vnd.cncf.model.dataset.v1.raw";

/// The layer annotations the spec defines (`annotations.go`).
pub const FILEPATH: &str = "org.cncf.model.filepath";
pub const FILE_METADATA: &str = "org.cncf.model.file.metadata+json";
pub const UNTESTED: &str = "org.cncf.model.file.mediatype.untested";

/// The raw layer media types a ModelPack artifact may hold: what an import takes.
pub const RAW_LAYERS: [&str; 5] = [WEIGHT, WEIGHT_CONFIG, DOC, CODE, DATASET];

/// The media type a file at `path` is exported as, and whether that was a guess (a
/// name of no kind known here: a weight config, marked untested as the spec allows).
pub fn of_path(path: &str) -> (&'static str, bool) {
    let name = path.rsplit('/').next().unwrap_or(path).to_ascii_lowercase();
    let ext = name.rsplit_once('.').map(|(_, e)| e).unwrap_or("");
    let stem = name.split('.').next().unwrap_or("");
    if matches!(
        stem,
        "readme" | "license" | "licence" | "notice" | "copying" | "changelog"
    ) || matches!(ext, "md" | "rst" | "pdf" | "html")
    {
        return (DOC, false);
    }
    let kind = match ext {
        "safetensors" | "bin" | "pt" | "pth" | "ckpt" | "gguf" | "ggml" | "onnx" | "h5"
        | "msgpack" | "npz" | "npy" | "tflite" | "engine" | "plan" | "mlmodel" | "pb" | "nemo"
        | "keras" | "ot" | "faiss" | "index" => WEIGHT,
        // `*.model` is a SentencePiece tokenizer.
        "json" | "yaml" | "yml" | "toml" | "txt" | "vocab" | "tiktoken" | "spm" | "model"
        | "jinja" | "cfg" | "ini" => WEIGHT_CONFIG,
        "py" | "sh" | "ipynb" | "js" | "ts" | "rs" | "go" | "c" | "cc" | "cpp" | "h" | "cu"
        | "java" => CODE,
        "parquet" | "arrow" | "jsonl" | "csv" | "tsv" | "tfrecord" | "avro" | "feather"
        | "lance" | "wav" | "flac" | "mp3" | "png" | "jpg" | "jpeg" | "webp" => DATASET,
        _ => return (WEIGHT_CONFIG, true),
    };
    (kind, false)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn files_are_told_apart_by_name() {
        assert_eq!(of_path("model-00001-of-00004.safetensors"), (WEIGHT, false));
        assert_eq!(of_path("onnx/model.onnx"), (WEIGHT, false));
        assert_eq!(of_path("config.json"), (WEIGHT_CONFIG, false));
        assert_eq!(of_path("tokenizer.model"), (WEIGHT_CONFIG, false));
        assert_eq!(of_path("merges.txt"), (WEIGHT_CONFIG, false));
        assert_eq!(of_path("README.md"), (DOC, false));
        assert_eq!(of_path("LICENSE"), (DOC, false));
        assert_eq!(of_path("modeling_qwen.py"), (CODE, false));
        assert_eq!(of_path("eval/test.parquet"), (DATASET, false));
        assert_eq!(of_path(".gitattributes"), (WEIGHT_CONFIG, true));
        assert_eq!(of_path("Makefile"), (WEIGHT_CONFIG, true));
    }
}
