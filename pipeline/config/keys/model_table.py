"""The models, a table per kind of dataset: each model's name (the value of `train.<ds>.model`),
the class of its settings (the section `train.<ds>.<model>`) and its builder, as
tensorflow/models registers its backbones. A train section holds the settings of each model it
may switch to (`-S train.<ds>.model=mlp` needs `train.<ds>.mlp`); a model's settings are never
required of a section that does not name it. The builders are named, not imported: they need
TensorFlow, which the config never loads."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, Optional

from pipeline.fields import fraction, non_negative_int, positive_int, spec


def _positive_ints(help: str, what: str = "a non-empty list of positive integers"):
    return spec(what, lambda v: len(v) > 0 and all(n > 0 for n in v), help=help)


def _batchnorm_momentum(whose: str = "its", keras_default: str = "0.99", note: str = ""):
    return fraction(
        help=f"Moving-average momentum of {whose} BatchNormalization layers: what evaluation and serving "
        f"normalise with follows the training batches' statistics this slowly (Keras' {keras_default}, made for "
        "long runs, lags behind the weights through a short training: inference at chance for the first epochs)."
        + note,
        low_open=True,
    )


def _units(help: str):
    return spec("a list of positive integers", lambda v: all(n > 0 for n in v), help=help)


def _dropout():
    return fraction(help="Dropout rate before the last Dense layer (0: none).")


# --------------------------------------------------------------------------- labelled texts


@dataclass(frozen=True)
class Conv1DSettings:
    embedding_dim: int = positive_int(help="Width of the word embedding.")
    conv_filters: tuple[int, ...] = _positive_ints(
        "Filters of each Conv1D block, in order (ReLU, then MaxPooling1D); the reference settings: [64, 32]."
    )
    conv_kernel_sizes: tuple[int, ...] = spec(
        "a list of positive integers, one per conv_filters",
        lambda v: all(n > 0 for n in v),
        help="Kernel size of each Conv1D block, one per conv_filters; the reference settings: [5, 3].",
    )
    pool_size: int = positive_int(help="MaxPooling1D window after each Conv1D.")

    def disagreement(self) -> Optional[str]:
        if len(self.conv_kernel_sizes) != len(self.conv_filters):
            return (
                f"conv_kernel_sizes: expected one kernel size per conv_filters ({len(self.conv_filters)}), "
                f"got {len(self.conv_kernel_sizes)}"
            )
        return None


@dataclass(frozen=True)
class MlpSettings:
    num_words: Optional[int] = spec(
        "an integer >= 4 or null",
        lambda v: v >= 4,
        help="The words the bag holds: the num_words most frequent of the word index (indices below it); the "
        "rarer ones count as the out-of-vocabulary mark. null: every word of the prepared data.",
    )
    output_mode: Literal["multi_hot", "count", "tf_idf"] = spec(
        help="What the bag says of a word (Keras' output_mode): multi_hot (present or not), count (how often), or "
        "tf_idf (the count weighted by the word's inverse document frequency in the training split, smoothed as "
        "scikit-learn's, each text's vector scaled to unit length, as scikit-learn's TfidfVectorizer; a word or "
        "pair the bag does not hold, and the marks (a text's start, a word out of the vocabulary), weigh 0 there, "
        "as a term outside that vectorizer's vocabulary)."
    )
    sublinear_tf: bool = spec(
        "true or false",
        help="true: a count c becomes 1 + ln(c) (0 stays 0) before any weighting, as scikit-learn's sublinear_tf, "
        "so that a word said ten times weighs about three times one said once; for output_mode count or tf_idf "
        "(multi_hot's 0 and 1 stay as they are) and the n-grams of char_ngrams.",
    )
    ngrams: Literal[1, 2] = spec(
        help="1: the bag holds single words; 2: also the pairs of adjacent words that the training split holds "
        "twice or more (num_pairs says how many), as Keras' TextVectorization ngrams=2 and scikit-learn's "
        "ngram_range=(1, 2), weighed as the words are."
    )
    num_pairs: Optional[int] = spec(
        "a positive integer or null",
        lambda v: v > 0,
        help="With ngrams 2, the most frequent pairs the bag holds; null: every pair the training split holds twice "
        "or more (counted as it streams by, the pairs seen once let go past a million: the count's memory is "
        "bounded, and so is the bag's).",
    )
    char_ngrams: tuple[int, ...] = spec(
        "[] or two integers from 1 to 10, the first at most the second",
        lambda v: len(v) == 0 or (len(v) == 2 and 1 <= v[0] <= v[1] <= 10),
        help="[]: words only. [shortest, longest]: the bag also holds the n-grams of each word's characters "
        "(the word framed by a space at each end, as scikit-learn's char_wb analyzer), of the words the bag holds, "
        "those in two or more texts of the training split; a text's n-grams are counted, weighted by their inverse "
        "document frequency in the training split and scaled to unit length (TF-IDF), whatever output_mode says of "
        "the words. Words that share a stem or an ending share n-grams, so a word seen rarely speaks as its kin do.",
    )
    char_ngrams_weight: float = spec(
        "a positive number",
        lambda v: v > 0,
        help="With char_ngrams, what the n-grams' unit vector is multiplied by beside the words' (then, with "
        "output_mode tf_idf, the two made one unit vector). Under an L2 penalty, a weight w makes the n-grams' "
        "weights 1/w^2 as dear: below 1 they speak where the words do not (a word seen rarely or never), and "
        "give way where the words are known; 1: they weigh as the words.",
    )
    units: tuple[int, ...] = _units(
        "Units of each hidden Dense layer (ReLU), in order; []: none, the classes' Dense layer on the bag "
        "itself (a linear model, as a logistic regression on the same features).",
    )
    dropout: float = _dropout()
    l2: float = spec(
        "a non-negative number",
        lambda v: v >= 0,
        help="The L2 penalty on the kernel of each Dense layer (the hidden ones and the logits'), Keras' L2 "
        "regularizer: l2 x the sum of the squared weights is added to the loss. With units [] and loss "
        "squared_hinge the model is a linear SVM, and l2 = 1 / (2 C n) of n training texts gives LinearSVC's C. "
        "0: none.",
    )


# --------------------------------------------------------------------------- image folders


@dataclass(frozen=True)
class SmallConvnetSettings:
    filters: tuple[int, ...] = _positive_ints(
        "Filters of each block, in order: two 3x3 convolutions (batch-normalised, ReLU), then a 2x2 max "
        "pooling while the picture is larger than 4 pixels a side; then global average pooling, so that the "
        "head's size is the last block's filters whatever the picture's. For pictures of 8 to 128 pixels a side."
    )
    dense_units: int = positive_int(help="Units of the Dense layer on the pooled features.")
    dropout: float = _dropout()
    batchnorm_momentum: float = _batchnorm_momentum(
        note=" With batchnorm_statistics above 0 the statistics are recomputed at each epoch's end and this "
        "changes nothing that is validated, kept or served."
    )
    shift: float = spec(
        "a number in [0, 0.5)",
        lambda v: 0.0 <= v < 0.5,
        help="Augmentation while training (never at evaluation or serving): each picture shifted by up to this "
        "share of its side, up, down, left or right, a new draw every epoch; 0: none.",
    )
    zoom: float = spec(
        "a number in [0, 0.5)",
        lambda v: 0.0 <= v < 0.5,
        help="Augmentation while training: each picture zoomed in or out by up to this share of its side; 0: none.",
    )
    flip: Literal["none", "horizontal", "vertical", "both"] = spec(
        help="Augmentation while training: pictures mirrored at random, left to right (horizontal), top to bottom "
        "(vertical) or both. Only where a class stays the same when mirrored (most pictures of objects): never "
        "for digits, letters or text, which mirroring turns into no class or another one."
    )
    greyscale: float = spec(
        "a number in [0, 1]",
        lambda v: 0.0 <= v <= 1.0,
        help="Augmentation while training: each colour picture shown in grey with this probability, so that the "
        "model learns shapes as well as colours (colours that differ between the pictures it learns from and those "
        "it is used on mislead it less); nothing for grey pictures; 0: none.",
    )
    erasing: float = spec(
        "a number in [0, 1]",
        lambda v: 0.0 <= v <= 1.0,
        help="Augmentation while training: each picture, with this probability, has a rectangle replaced by "
        "noise (Keras' RandomErasing; each side of the rectangle 14% to 57% of the picture's, at random), so that "
        "the model learns from every part of a picture rather than the one part that tells the classes apart "
        "in the pictures it learns from; 0: none.",
    )
    batchnorm_statistics: int = non_negative_int(
        help="Training pictures (the first of the prepared training split, which preprocess writes in a seeded "
        "shuffle) that each BatchNormalization layer's moving mean and variance are recomputed from at every "
        "epoch's end, before validation, with that epoch's weights, augmented as in training: what is "
        "validated, kept as the best epoch and served normalises with the model's own statistics, not a moving "
        "average over earlier weights, under which validation accuracy swings from one epoch to the next. "
        "Costs a forward pass over them each epoch; 0: Keras' moving averages only (batchnorm_momentum).",
    )


@dataclass(frozen=True)
class MobileNetV2Settings:
    img_size: int = spec(
        "an integer >= 32",
        lambda v: v >= 32,
        help="Side the images are resized to in the input pipeline (MobileNetV2 needs "
        "at least 32); the reference settings train at 112.",
    )
    alpha: float = spec(
        "a positive number",
        lambda v: v > 0,
        help="MobileNetV2's width multiplier (Keras' alpha): each layer's filters times "
        "alpha, rounded to a multiple of 8; 1.0 is the published network, whose "
        "pointwise layers cost about alpha squared.",
    )
    dense_units: int = positive_int(help="Units of the Dense layer on the pooled features.")
    batchnorm_momentum: float = _batchnorm_momentum("the backbone's", "0.999")
    weights: Optional[Literal["imagenet"]] = spec(
        help="The backbone's initial weights: null, from scratch; imagenet, Keras' ImageNet weights for this "
        "alpha, fetched by the download stage as one of the dataset's download.pretrained (pinned by its sha256, "
        "looked up in the mirror like the data) and fine-tuned with the rest."
    )


# --------------------------------------------------------------------------- tables of columns


@dataclass(frozen=True)
class TableMlpSettings:
    units: tuple[int, ...] = _units(
        "Units of each hidden Dense layer (ReLU), in order, on the encoded columns (each number normalised "
        "by the training split's mean and variance, each category one-hot: Keras' FeatureSpace); []: none, a "
        "linear model (as a logistic regression on the same features).",
    )
    dropout: float = _dropout()
    linear: bool = spec(
        "true or false",
        help="true: the encoded columns also reach the classes' logits through a Dense layer of their own, added "
        "to the hidden layers' (wide and deep): a linear model of the columns, with the hidden layers learning "
        "what it misses; false: the hidden layers' logits alone.",
    )


# --------------------------------------------------------------------------- the tables


@dataclass(frozen=True)
class Model:
    settings: type  # the class of the section train.<ds>.<name>
    builder: str  # "module:function" of pipeline.training: (settings, prepared data) -> a Keras model
    help: str


MODELS: dict[str, dict[str, Model]] = {
    "texts": {
        "conv1d": Model(
            Conv1DSettings,
            "pipeline.training.models:conv1d",
            "an Embedding, a Conv1D+MaxPool block per conv_filters, and a Dense of the classes",
        ),
        "mlp": Model(
            MlpSettings,
            "pipeline.training.models:mlp",
            "a bag of words (multi-hot, counts or TF-IDF over the word index) and Dense layers",
        ),
    },
    "tabular": {
        "table_mlp": Model(
            TableMlpSettings,
            "pipeline.training.models:table_mlp",
            "the columns encoded by Keras' FeatureSpace (numbers normalised, categories one-hot) and Dense layers",
        ),
    },
    "pictures": {
        "small_convnet": Model(
            SmallConvnetSettings,
            "pipeline.training.models:small_convnet",
            "a few blocks of 3x3 convolutions, learnt from scratch: pictures of tens of pixels a side",
        ),
        "mobilenet_v2": Model(
            MobileNetV2Settings,
            "pipeline.training.models:mobilenet_v2",
            "MobileNetV2 without top, from scratch or from ImageNet weights, global average pooling and "
            "Dense dense_units: photos",
        ),
    },
}
