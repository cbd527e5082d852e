"""Fixtures for the sources whose class is read off each image's path (readers/named_paths.py).

``LAYOUTS[key]`` lists the source's files (the catalogue's names) with their members: member
path -> the class the reader must give it, or None for a member it must skip. Images are
tiny PNG/JPEG/GIF/BMP/PGM files whose pixels differ per member.
"""

from __future__ import annotations

from pathlib import Path

from tests.support.source_fixtures.tiny import encoded, source_dir, write_tar, write_zip

Members = dict[str, "str | None"]
FORMATS = {".png": "PNG", ".jpg": "JPEG", ".jpeg": "JPEG", ".gif": "GIF", ".bmp": "BMP", ".pgm": "PPM", ".tif": "TIFF"}

LAYOUTS: dict[str, dict[str, Members]] = {
    "coil20": {
        "coil-20-proc.zip": {
            "coil-20-proc/obj2__0.png": "obj2",
            "coil-20-proc/obj1__5.png": "obj1",
            "coil-20-proc/obj20__71.png": "obj20",
            "coil-20-proc/readme.txt": None,
        }
    },
    "mpeg7": {
        "MPEG7dataset.zip": {
            "original/apple-1.gif": "apple",
            "original/Bone-2.gif": "Bone",
            "original/apple-2.gif": "apple",
            "original/confusions.gif": None,
            "original/shapedata.gif": None,
        }
    },
    "umist": {"face.tar.gz": {"1b/face001.pgm": "1b", "1a/face001.pgm": "1a", "1a/face002.pgm": "1a"}},
    "kth_tips": {
        "kth_tips_col_200x200.tar": {
            "KTH_TIPS/sponge/52a-scale_1_im_1_col.png": "sponge",
            "KTH_TIPS/cotton/1-scale_1_im_1_col.png": "cotton",
            "KTH_TIPS/cotton/Thumbs.db": None,
        }
    },
    "kth_tips_2a": {
        "kth-tips2-a_col_200x200.tar": {
            "KTH-TIPS2-a/wool/sample_a/a.png": "wool",
            "KTH-TIPS2-a/cork/sample_b/b.png": "cork",
        }
    },
    "kth_tips_2b": {
        "kth-tips2-b_col_200x200.tar": {
            "KTH-TIPS2-b/wool/sample_a/a.png": "wool",
            "KTH-TIPS2-b/brown_bread/sample_d/d.png": "brown_bread",
        }
    },
    "uiuc_texture": {
        f"T{a:02d}-T{a + 4:02d}.zip": {f"T{a:02d}_class/T{a:02d}_01.jpg": f"T{a:02d}_class"} for a in (1, 6, 11, 16, 21)
    },
    "umd": {
        "textures-1.zip": {"10/a.jpg": "10", "2/b.jpg": "2", "2/Thumbs.db": None},
        "textures-2.zip": {"25/c.jpg": "25"},
    },
    "flickr_material_database": {
        "FMD.zip": {
            "image/wood/w1.jpg": "wood",
            "image/fabric/f1.jpg": "fabric",
            "mask/wood/w1.jpg": None,
            "image/wood/plot.m": None,
        }
    },
    "animal": {
        "non_rigid_shape_A.zip": {"non_rigid_shape_A/cat/1.tif": "cat"},
        "non_rigid_shape_B.zip": {"non_rigid_shape_B/dog/1.tif": "dog", "non_rigid_shape_B/cat/2.tif": "cat"},
    },
    "tubercolosis": {
        "tuberculosis-tb-chest-xray-dataset.zip": {
            "TB_Chest_Radiography_Database/Tuberculosis/Tuberculosis-1.png": "Tuberculosis",
            "TB_Chest_Radiography_Database/Normal/Normal-1.png": "Normal",
            "TB_Chest_Radiography_Database/README.md.txt": None,
        }
    },
    "covid_19_xray": {
        "covid19-radiography-database.zip": {
            "COVID-19_Radiography_Dataset/COVID/images/COVID-1.png": "COVID",
            "COVID-19_Radiography_Dataset/COVID/masks/COVID-1.png": None,
            "COVID-19_Radiography_Dataset/Viral Pneumonia/images/Viral Pneumonia-1.png": "Viral Pneumonia",
            "COVID-19_Radiography_Dataset/Normal.metadata.xlsx": None,
        }
    },
    "not_mnist": {
        "notmnist.zip": {
            "notMNIST_small/notMNIST_small/B/x.png": "B",
            "notMNIST_small/notMNIST_small/J/y.png": "J",
            "notMNIST_large/notMNIST_large/A/z.png": None,
        }
    },
    "synthetic_covid19_xray": {"G_NC.zip": {"G1/1.png": "Normal"}, "G_PC.zip": {"G2/1.png": "Pneumonia"}},
    "scenes8": {
        "spatial_envelope_256x256_static_8outdoorcategories.zip": {
            "spatial_envelope_256x256_static_8outdoorcategories/coast_n203.jpg": "coast",
            "spatial_envelope_256x256_static_8outdoorcategories/tallbuilding_a1.jpg": "tallbuilding",
        }
    },
    "aberdeen": {
        "Aberdeen.zip": {
            "marie1.jpg": "marie",
            "marieg2.jpg": "marie",
            "clean_adrian3.jpg": "adrian",
            "bob_4.jpg": "bob_",
        }
    },
    "cmu_amp_expression": {
        "faceExpressionDatabase.zip": {"A00.bmp": "A", "M74.bmp": "M", "B07.bmp": "B", "readme.txt": None}
    },
}


def _data(name: str, seed: int) -> bytes:
    suffix = Path(name).suffix.lower()
    if suffix not in FORMATS:
        return b"not an image\n"
    grey = suffix in (".pgm", ".gif")
    return encoded(seed, FORMATS[suffix], 6, 7, 1 if grey else 3)


def write_named_paths(data_dir: Path, key: str) -> list[str]:
    """Write ``key``'s files; returns the classes of the rows the reader must make, in order."""
    folder = source_dir(data_dir, key)
    expected: list[str] = []
    for seed, (file_name, members) in enumerate(LAYOUTS[key].items()):
        data = {name: _data(name, 100 * seed + i) for i, name in enumerate(members)}
        if file_name.endswith(".zip"):
            write_zip(folder / file_name, data)
            order = sorted(members)
        else:
            write_tar(folder / file_name, data, mode="w:gz" if file_name.endswith("gz") else "w")
            order = list(members)
        expected += [c for name in order if (c := members[name]) is not None]
    return expected


__all__ = ["LAYOUTS", "write_named_paths"]
