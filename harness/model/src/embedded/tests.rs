use std::sync::OnceLock;

use super::*;

/// A small valid recipe (about 1.3 M parameters) for the fast tests.
const TINY: &str = r#"
architecture = "qwen3"
name = "tiny"
n_embd = 512
n_layer = 2
n_head = 8
n_head_kv = 2
head_dim = 64
n_ff = 256
n_vocab = 96
context_length = 64
rope_freq_base = 1000000.0
rms_eps = 1e-6
seed = 7
embd_std = 0.5
norm_noise_std = 0.05
logit_std = 3.0
quantization = "q4_k_m"
sha256 = ""
"#;

/// `text` with the line `key = ...` replaced by `line` (removed when `line` is empty).
fn with(text: &str, key: &str, line: &str) -> String {
    let mut found = false;
    let out: Vec<&str> = text
        .lines()
        .filter_map(|l| {
            if l.split('=').next().map(str::trim) == Some(key) {
                found = true;
                (!line.is_empty()).then_some(line)
            } else {
                Some(l)
            }
        })
        .collect();
    assert!(found, "no line {key}");
    out.join("\n")
}

fn tiny() -> Recipe {
    Recipe::parse("tiny.toml", TINY).unwrap()
}

fn repo_recipe() -> Recipe {
    Recipe::load(&Recipe::default_path()).unwrap()
}

/// The repository's model, generated once per test process.
fn repo_model() -> &'static [u8] {
    static MODEL: OnceLock<Vec<u8>> = OnceLock::new();
    MODEL.get_or_init(|| generate(&repo_recipe()).unwrap())
}

#[test]
fn repo_recipe_is_valid() {
    let r = repo_recipe();
    assert_eq!(r.scheme, Scheme::Q4KM);
    assert_eq!((r.n_embd, r.n_layer, r.n_head, r.n_head_kv, r.head_dim), (512, 8, 8, 2, 64));
    assert_eq!((r.n_ff, r.n_vocab, r.context_length), (1536, 3072, 512));
    assert!(r.sha256.is_some(), "the recipe has no sha256: run `tiercheck golden model --bless`");
}

#[test]
fn bad_recipes_are_refused_with_the_file_named() {
    let cases: &[(&str, &str, &str)] = &[
        ("architecture", "architecture = \"gemma3\"", "only \"qwen3\""),
        ("name", "name = \" \"", "name is empty"),
        ("n_embd", "n_embd = 384", "n_embd = 384: must be a multiple of 256"),
        ("n_embd", "n_embd = 256", "at least 512"),
        ("n_layer", "n_layer = 0", "n_layer = 0"),
        ("n_head_kv", "n_head_kv = 3", "n_head = 8 is not a multiple of n_head_kv = 3"),
        ("head_dim", "head_dim = 48", "n_head * head_dim = 8 * 48 = 384"),
        ("head_dim", "head_dim = 33", "head_dim = 33: must be even"),
        ("n_ff", "n_ff = 1000", "n_ff = 1000"),
        ("n_vocab", "n_vocab = 0", "n_vocab = 0"),
        ("rms_eps", "rms_eps = -1e-6", "rms_eps = -0.000001: must be finite and positive"),
        ("rms_eps", "rms_eps = 0.5", "implausibly large"),
        ("logit_std", "logit_std = nan", "logit_std = NaN"),
        ("norm_noise_std", "norm_noise_std = -0.1", "norm_noise_std = -0.1"),
        ("quantization", "quantization = \"iq2_xxs\"", "quantization = \"iq2_xxs\""),
        ("sha256", "sha256 = \"ABC\"", "expected 64 lowercase hex digits"),
        ("seed", "seed = -1", "not a valid recipe"),
        ("n_ff", "", "missing field `n_ff`"),
        ("n_ff", "n_ff = 256\nn_ffn = 256", "unknown field `n_ffn`"),
        ("n_ff", "n_ff = \"256\"", "invalid type"),
    ];
    for (key, line, want) in cases {
        let text = with(TINY, key, line);
        let err = Recipe::parse("bad/recipe.toml", &text).expect_err(line).to_string();
        assert!(err.starts_with("bad/recipe.toml: "), "{line}: {err}");
        assert!(err.contains(want), "{line}: expected {want:?} in {err:?}");
    }
    // Qwen3 lets the attention width differ from n_embd.
    let wide = with(TINY, "head_dim", "head_dim = 128");
    assert_eq!(Recipe::parse("r", &wide).unwrap().head_dim, 128);
}

#[test]
fn canonical_recipe_leaves_out_the_sha256() {
    let a = tiny();
    let b = Recipe::parse("other", &rewrite_sha_line(TINY, &"a".repeat(64))).unwrap();
    assert_eq!(b.sha256.as_deref(), Some("a".repeat(64).as_str()));
    assert_eq!(a.canonical(), b.canonical());
    let c = Recipe::parse("c", &with(TINY, "seed", "seed = 8")).unwrap();
    assert_ne!(a.canonical(), c.canonical());
}

#[test]
fn rewrite_sha_line_keeps_everything_else() {
    let text = "# sha256 = \"old\" in a comment\na = 1\nsha256 = \"\"  # trailing\nb = 2";
    let out = rewrite_sha_line(text, "ff");
    assert_eq!(out, "# sha256 = \"old\" in a comment\na = 1\nsha256 = \"ff\"\nb = 2\n");
    assert_eq!(rewrite_sha_line("a = 1\n", "ff"), "a = 1\nsha256 = \"ff\"\n");
}

#[test]
fn repo_prompts_are_valid_and_varied() {
    let r = repo_recipe();
    let p = Prompts::load(&Prompts::default_path(), &r).unwrap();
    assert_eq!(p.steps, 48);
    assert_eq!(p.prompts.len(), 6);
    let lens: Vec<usize> = p.prompts.iter().map(|p| p.tokens.len()).collect();
    assert!(lens.iter().all(|&n| (4..=24).contains(&n)), "{lens:?}");
    assert!(lens.contains(&4) && lens.contains(&24), "{lens:?}");
    let distinct: HashSet<usize> = lens.iter().copied().collect();
    assert_eq!(distinct.len(), lens.len(), "lengths differ: {lens:?}");
    assert!(p
        .prompts
        .iter()
        .any(|p| { p.tokens.windows(2).filter(|w| w[0] == w[1]).count() >= 3 }));
    assert!(p.prompts.iter().any(|p| p.tokens[0] >= r.n_vocab - 16));
}

#[test]
fn bad_prompts_are_refused_with_the_file_named() {
    let r = tiny(); // n_vocab 96, context_length 64
    let ok = "steps = 8\n[[prompt]]\nname = \"a\"\ntokens = [1, 2]\n";
    assert_eq!(Prompts::parse("p.toml", ok, &r).unwrap().prompts[0].tokens, vec![1, 2]);
    let cases: &[(&str, &str)] = &[
        ("steps = 8\n[[prompt]]\nname = \"a\"\ntokens = [1, 96]", "token 1 is 96, outside"),
        ("steps = 8\n[[prompt]]\nname = \"a\"\ntokens = []", "prompt 1 (\"a\"): no tokens"),
        (
            "steps = 8\n[[prompt]]\nname = \"a\"\ntokens = [1]\n[[prompt]]\nname = \"a\"\n\
             tokens = [2]",
            "prompt 2 (\"a\"): the name is used twice",
        ),
        ("steps = 8\n[[prompt]]\nname = \"\"\ntokens = [1]", "prompt 1: empty name"),
        ("steps = 0\n[[prompt]]\nname = \"a\"\ntokens = [1]", "steps = 0"),
        ("steps = 8", "no [[prompt]] entries"),
        ("steps = 60\n[[prompt]]\nname = \"a\"\ntokens = [1, 2, 3, 4, 5]", "exceed context_length"),
        ("steps = 8\n[[prompt]]\nname = \"a\"\ntokens = [-1]", "not a valid prompts file"),
        ("steps = 8\n[[prompt]]\nname = \"a\"\ntoken = [1]", "unknown field `token`"),
        ("[[prompt]]\nname = \"a\"\ntokens = [1]", "missing field `steps`"),
    ];
    for (text, want) in cases {
        let err = Prompts::parse("bad/prompts.toml", text, &r).expect_err(text).to_string();
        assert!(err.starts_with("bad/prompts.toml: "), "{err}");
        assert!(err.contains(want), "expected {want:?} in {err:?}");
    }
}

#[test]
fn normal_sampler_is_centred_with_unit_variance() {
    let mut rng = Rng::new(1);
    let n = 200_000;
    let xs: Vec<f64> = (0..n).map(|_| f64::from(std_normal(&mut rng))).collect();
    let mean = xs.iter().sum::<f64>() / n as f64;
    let var = xs.iter().map(|x| (x - mean) * (x - mean)).sum::<f64>() / n as f64;
    assert!(mean.abs() < 0.01, "{mean}");
    assert!((var - 1.0).abs() < 0.01, "{var}");
    assert!(xs.iter().all(|x| x.abs() <= 6.0));
    // Pinned: the sampler is part of the model's definition.
    let mut rng = Rng::new(0);
    let first: Vec<f32> = (0..3).map(|_| std_normal(&mut rng)).collect();
    let want = PINNED_FIRST_NORMALS.map(|n| n as f32 / 65536.0);
    assert_eq!(first, want);
}

/// The first three samples for seed 0, times 65536 (computed by an independent Python
/// transcription of xoshiro256** and the sampler).
const PINNED_FIRST_NORMALS: [i32; 3] = [-3130, 12762, -20561];

#[test]
fn f32_weights_have_the_intended_scales() {
    let r = tiny();
    let stats = |name: &str| {
        let t = r.tensors().into_iter().find(|t| t.name == name).unwrap();
        let v = t.values(r.seed);
        let n = v.len() as f64;
        let mean = v.iter().map(|&x| f64::from(x)).sum::<f64>() / n;
        let var = v.iter().map(|&x| (f64::from(x) - mean).powi(2)).sum::<f64>() / n;
        (mean, var.sqrt(), n)
    };
    // Five standard errors of the mean; the std within 5 % (n >= 512).
    let close = |name: &str, want_mean: f64, want_std: f64| {
        let (m, s, n) = stats(name);
        assert!((m - want_mean).abs() < 5.0 * want_std / n.sqrt(), "{name}: mean {m}");
        assert!((s / want_std - 1.0).abs() < 0.05, "{name}: std {s}, want {want_std}");
    };
    close("token_embd.weight", 0.0, 0.5);
    close("blk.0.attn_q.weight", 0.0, 1.0 / 512f64.sqrt());
    close("blk.1.ffn_up.weight", 0.0, 1.0 / 512f64.sqrt());
    close("blk.0.attn_output.weight", 0.0, 1.0 / 512f64.sqrt() / 2.0);
    close("blk.1.ffn_down.weight", 0.0, 1.0 / 256f64.sqrt() / 2.0);
    close("output.weight", 0.0, 3.0 / 512f64.sqrt());
    close("blk.0.attn_norm.weight", 1.0, 0.05);
    // Distinct tensors draw distinct streams.
    assert_ne!(stats("blk.0.attn_q.weight"), stats("blk.1.attn_q.weight"));
}

#[test]
fn generation_is_deterministic_and_seeded() {
    let r = tiny();
    let a = generate(&r).unwrap();
    assert_eq!(a, generate(&r).unwrap());
    let other = Recipe::parse("t", &with(TINY, "seed", "seed = 8")).unwrap();
    assert_ne!(a, generate(&other).unwrap());
}

#[test]
fn repo_model_matches_the_recipe_sha256() {
    let r = repo_recipe();
    let actual = sha256_hex(repo_model());
    assert_eq!(
        Some(actual.as_str()),
        r.sha256.as_deref(),
        "the generated model differs from {}: the generator, the quantizers, the GGUF writer \
         or the recipe changed (refresh with `tiercheck golden model --bless` if intended)",
        r.path
    );
}

#[test]
fn repo_model_reads_back_with_the_q4_k_m_types() {
    let r = repo_recipe();
    assert_eq!(r.n_layer, 8, "the expected more-bits layers below are for 8 layers");
    let f = GgufFile::from_bytes("model", repo_model().to_vec()).unwrap();
    let specs = r.tensors();
    assert_eq!(f.tensors().len(), specs.len());
    assert_eq!(specs.len(), 1 + 11 * 8 + 2);
    let more_bits = [0, 3, 6, 7];
    for (t, s) in f.tensors().iter().zip(&specs) {
        assert_eq!(t.name, s.name);
        assert_eq!(t.dims, s.dims, "{}", t.name);
        let layer = t
            .name
            .strip_prefix("blk.")
            .and_then(|rest| rest.split('.').next())
            .map(|l| l.parse::<u32>().unwrap());
        let want = if s.dims.len() == 1 {
            GgmlType::F32
        } else if t.name == "output.weight"
            || ((t.name.ends_with(".attn_v.weight") || t.name.ends_with(".ffn_down.weight"))
                && more_bits.contains(&layer.unwrap()))
        {
            GgmlType::Q6_K
        } else {
            GgmlType::Q4_K
        };
        assert_eq!(t.ty, want, "{}", t.name);
    }
    let u32s = [
        ("qwen3.embedding_length", 512),
        ("qwen3.block_count", 8),
        ("qwen3.feed_forward_length", 1536),
        ("qwen3.attention.head_count", 8),
        ("qwen3.attention.head_count_kv", 2),
        ("qwen3.attention.key_length", 64),
        ("qwen3.attention.value_length", 64),
        ("qwen3.context_length", 512),
        ("qwen3.vocab_size", 3072),
        ("general.file_type", 15),
        ("general.quantization_version", 2),
    ];
    for (k, v) in u32s {
        assert_eq!(f.get_u32(k).unwrap(), v, "{k}");
    }
    assert_eq!(f.get_str("general.architecture").unwrap(), "qwen3");
    assert_eq!(f.get_str("tokenizer.ggml.model").unwrap(), "none");
    assert_eq!(f.get_f32("qwen3.rope.freq_base").unwrap(), 1.0e6);
    assert_eq!(f.get_f32("qwen3.attention.layer_norm_rms_epsilon").unwrap(), 1.0e-6);
    assert_eq!(f.get_u64(SEED_KEY).unwrap(), r.seed);
    assert_eq!(f.get_str(RECIPE_KEY).unwrap(), r.canonical());
}

#[test]
fn build_caches_verifies_and_refuses_a_stale_sha() {
    let tmp = tempfile::tempdir().unwrap();
    let sha = sha256_hex(&generate(&tiny()).unwrap());
    let recipe = tmp.path().join("recipe.toml");
    fs::write(&recipe, rewrite_sha_line(TINY, &sha)).unwrap();
    let cache = tmp.path().join("cache");
    let opts = BuildOptions {
        recipe: Some(recipe.clone()),
        cache: Some(cache.clone()),
        ..Default::default()
    };

    let first = build(&opts).unwrap();
    assert!(first.generated);
    assert_eq!(first.path, cache.join("model").join(format!("{sha}.gguf")));
    assert_eq!(sha256_hex(&fs::read(&first.path).unwrap()), sha);
    let again = build(&opts).unwrap();
    assert!(!again.generated, "a verified cached file is reused");
    assert_eq!(again.path, first.path);

    // A damaged cached file is rebuilt.
    fs::write(&first.path, b"not a model").unwrap();
    assert!(build(&opts).unwrap().generated);
    assert_eq!(sha256_hex(&fs::read(&first.path).unwrap()), sha);
    assert_eq!(fs::read_dir(cache.join("model")).unwrap().count(), 1, "no temporary files");

    // A recipe edited without a new sha256 is not served the cached model.
    fs::write(&recipe, with(&rewrite_sha_line(TINY, &sha), "logit_std", "logit_std = 2.0"))
        .unwrap();
    let err = build(&opts).unwrap_err().to_string();
    assert!(err.contains("the generator") && err.contains("--bless"), "{err}");
    assert!(err.starts_with(&recipe.display().to_string()), "{err}");

    // No sha256 yet.
    fs::write(&recipe, TINY).unwrap();
    let err = build(&opts).unwrap_err().to_string();
    assert!(err.contains("no sha256 recorded") && err.contains(&sha), "{err}");
}

/// The bias field belongs to qwen2 alone: required there, refused for qwen3 and llama, and
/// it must be a finite, non-negative standard deviation; a llama head is a multiple of 8.
#[test]
fn qwen2_recipes_need_their_bias_std() {
    let qwen2 = with(TINY, "architecture", "architecture = \"qwen2\"");
    let cases: &[(&str, &str)] = &[
        (&qwen2, "bias_std is missing"),
        (&format!("{qwen2}\nbias_std = -0.5"), "bias_std = -0.5: must be finite"),
        (&format!("{qwen2}\nbias_std = inf"), "bias_std = inf: must be finite"),
        (&format!("{TINY}\nbias_std = 0.5"), "bias_std is for qwen2"),
    ];
    for (text, want) in cases {
        let err = Recipe::parse("bad/recipe.toml", text).expect_err(want).to_string();
        assert!(err.starts_with("bad/recipe.toml: ") && err.contains(want), "{want}: {err}");
    }
    let llama = with(TINY, "architecture", "architecture = \"llama\"");
    let e = Recipe::parse("r", &with(&llama, "head_dim", "head_dim = 36")).unwrap_err();
    assert!(e.to_string().contains("head_dim = 36: a llama head must be a multiple of 8"), "{e}");
    let e = Recipe::parse("r", &format!("{llama}\nbias_std = 0.5")).unwrap_err();
    assert!(e.to_string().contains("bias_std is for qwen2 (a llama model"), "{e}");
    let r = Recipe::parse("r", &format!("{qwen2}\nbias_std = 0.5")).unwrap();
    assert!(
        r.canonical().starts_with("architecture=qwen2 ")
            && r.canonical().contains(" bias_std=0.5 ")
    );
    let names: Vec<String> = r.tensors().into_iter().map(|t| t.name).collect();
    assert!(names.contains(&"blk.1.attn_v.bias".to_string()));
    assert!(!names.iter().any(|n| n.contains("attn_q_norm")));
}

/// The model of the recipe at `path`, checked to have the sha256 the recipe records, and
/// its hyper-parameters.
fn repo_model_of(path: &Path) -> (GgufFile, crate::HParams) {
    let r = Recipe::load(path).unwrap();
    let bytes = generate(&r).unwrap();
    assert_eq!(Some(sha256_hex(&bytes)), r.sha256, "{}: refresh with --bless if intended", r.path);
    let f = GgufFile::from_bytes(&r.path, bytes).unwrap();
    let hp = crate::HParams::from_gguf(&f).unwrap();
    (f, hp)
}

/// The repository's qwen2 recipe generates the file whose sha256 it records, which reads
/// back as a qwen2 model: F32 biases, the Q4_K_M mix's types for its matrices.
#[test]
fn repo_qwen2_model_matches_its_sha256() {
    let (f, hp) = repo_model_of(&Recipe::qwen2_path());
    assert_eq!((hp.arch.as_str(), hp.n_layer, hp.qkv_bias()), ("qwen2", 4, true));
    assert_eq!(f.tensor("blk.0.attn_q.bias").map(|t| t.ty), Some(GgmlType::F32));
    assert_eq!(f.tensor("blk.1.attn_q.weight").map(|t| t.ty), Some(GgmlType::Q4_K));
}

/// The repository's llama recipe generates the file whose sha256 it records: a llama
/// model without norms or biases, with Llama 3.1-like RoPE frequency factors (1, then a
/// ramp, then 8).
#[test]
fn repo_llama_model_matches_its_sha256() {
    let (f, hp) = repo_model_of(&Recipe::llama_path());
    assert_eq!((hp.arch.as_str(), hp.rope_normal(), hp.qkv_bias()), ("llama", true, false));
    let t = f.tensor("rope_freqs.weight").unwrap();
    let ff: Vec<f32> = f
        .tensor_data(t)
        .chunks_exact(4)
        .map(|b| f32::from_le_bytes(b.try_into().unwrap()))
        .collect();
    assert_eq!(ff.len(), 32);
    assert_eq!((ff[0], ff[7], ff[8], ff[12], ff[16], ff[31]), (1.0, 1.0, 1.0, 4.5, 8.0, 8.0));
}

/// The repository's qwen3moe recipe generates the file whose sha256 it records: 8 experts
/// of 512, 4 used; an F32 router; the 8-expert Q4_K_M rules (Q8_0 attn_k and attn_v, Q5_K
/// attn_output, Q6_K ffn_down_exps on the "more bits" layers 2 and 3).
#[test]
fn repo_qwen3moe_model_matches_its_sha256() {
    let (f, hp) = repo_model_of(&Recipe::qwen3moe_path());
    let moe = hp.moe.expect("experts");
    assert_eq!((moe.n_expert, moe.n_expert_used, moe.n_ff_exp), (8, 4, 512));
    let ty = |n: &str| f.tensor(n).map(|t| t.ty);
    assert_eq!(ty("blk.1.ffn_gate_inp.weight"), Some(GgmlType::F32));
    assert_eq!(ty("blk.1.attn_k.weight"), Some(GgmlType::Q8_0));
    assert_eq!(ty("blk.1.attn_v.weight"), Some(GgmlType::Q8_0));
    assert_eq!(ty("blk.1.attn_output.weight"), Some(GgmlType::Q5_K));
    assert_eq!(ty("blk.1.ffn_up_exps.weight"), Some(GgmlType::Q4_K));
    assert_eq!(ty("blk.1.ffn_down_exps.weight"), Some(GgmlType::Q4_K));
    assert_eq!(ty("blk.2.ffn_down_exps.weight"), Some(GgmlType::Q6_K));
    assert_eq!(ty("blk.3.ffn_down_exps.weight"), Some(GgmlType::Q6_K));
    assert_eq!(f.tensor("blk.2.ffn_gate_exps.weight").unwrap().dims, vec![512, 512, 8]);
}

/// The expert fields belong to qwen3moe alone, all three together, within llama.cpp's
/// limits.
#[test]
fn qwen3moe_recipes_need_their_experts() {
    let moe = with(TINY, "architecture", "architecture = \"qwen3moe\"");
    let full = format!("{moe}\nn_expert = 8\nn_expert_used = 2\nn_ff_exp = 256");
    assert!(Recipe::parse("r", &full).unwrap().experts.is_some());
    for (text, want) in [
        (moe.clone(), "needs n_expert, n_expert_used and n_ff_exp"),
        (full.replace("n_expert_used = 2", "n_expert_used = 9"), "n_expert_used = 9"),
        (full.replace("n_expert = 8", "n_expert = 600"), "n_expert = 600"),
        (full.replace("n_ff_exp = 256", "n_ff_exp = 100"), "n_ff_exp = 100"),
        (format!("{TINY}\nn_expert = 8\nn_expert_used = 2\nn_ff_exp = 256"), "are for qwen3moe"),
    ] {
        let e = Recipe::parse("r", &text).unwrap_err().to_string();
        assert!(e.contains(want), "{e}");
    }
}
