"""Whole-dataset image counts of the FULL stream's sources, public figures rounded: ESTIMATES.

The project's manifests leave ``num_examples`` empty until a dataset is prepared, so
``bench/paper_scale.py`` sizes each task from these (times the split's train fraction);
``--sizes`` replaces any of them with prepared counts. Apart from the estimate's model because
this is data, not arithmetic.
"""

from __future__ import annotations

APPROX_IMAGES: dict[str, int] = {
    "magellan_venus_volcanoes": 134, "aberdeen": 690, "landsat": 6_435, "brodatz": 1_000,
    "olivetti_face": 400, "coil20": 1_440, "coil100": 7_200, "mpeg7": 1_400, "butterflies": 620,
    "mnist": 70_000, "caltech101": 9_144, "umist": 575, "cmu_amp_expression": 975,
    "pascal_voc2005": 1_600, "caltech_categories": 2_000, "uiuc_cars": 1_050, "aloi": 72_000,
    "scenes8": 2_690, "scenes15": 4_485, "pascal_voc2006": 5_300, "extended_yaleb": 16_128,
    "voc_2007": 9_963, "ig02": 1_100, "ppmi": 4_800, "caltech256": 30_607,
    "imagenet2012": 1_331_167, "lfw": 6_000, "oxford_flowers_17": 1_360,
    "flickr_material_database": 1_000, "oxford_flowers102": 8_189, "belgium_tsc": 7_095,
    "german_tsr": 51_839, "vistex": 1_000, "umd": 1_000, "kth_tips": 810, "uiuc_texture": 1_000,
    "kth_tips_2b": 4_752, "cvc_muscima": 1_000, "iaprtc12": 20_000, "sketch": 20_000,
    "kth_tips_2a": 4_608, "voc_2012": 11_540, "smallnorb": 48_600, "wiki_paintings_style": 80_000,
    "mit_scenes": 15_620, "sun397": 108_754, "cifar10": 60_000, "caltech_birds2011": 11_788,
    "stanford_cars": 16_185, "fgvc_aircraft_family": 10_000, "dtd": 5_640,
    "coco_single_label": 100_000, "oxford_iiit_pet": 7_349, "stanford_dogs": 20_580,
    "animal": 10_000, "silhouettes_28": 8_671, "interact": 5_000, "voc_actions": 4_600,
    "svhn_cropped": 99_289, "chars74k": 7_705, "celeb_a": 202_599, "lfwa": 6_000,
    "sun_attributes": 14_340, "cifar100": 60_000, "tid2008": 1_700, "tid2013": 3_000,
    "usps": 9_298, "semeion": 1_593, "mnist_m": 68_000, "office_caltech_10": 2_533,
    "pacs": 9_991, "caltech_camera_traps": 60_000, "emnist_balanced": 131_600,
    "casia_hwdb": 1_000_000, "melanoma": 2_750, "trancos": 1_244, "mall": 2_000,
    "fashion_mnist": 70_000, "not_mnist": 18_700, "tiny_imagenet": 110_000, "stl10": 13_000,
    "food101": 101_000, "mnist_rotation": 62_000, "awa2": 37_322, "food101n": 335_000,
    "shanghai_tech": 1_200, "animal_web": 21_900, "biwi": 15_700, "domainnet": 586_575,
    "pneumonia_chest_xray": 5_856, "path_mnist": 107_180, "nih_chest_xray": 112_120,
    "tubercolosis": 800, "covid_19_xray": 21_000, "patch_camelyon": 327_680, "ddsm": 10_000,
    "synthetic_covid19_xray": 21_000,
}
FALLBACK_IMAGES = 10_000  # a dataset in none of the above


__all__ = ["APPROX_IMAGES", "FALLBACK_IMAGES"]
