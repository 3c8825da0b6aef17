"""SQuAD-format question answering data (SQuAD v1.1 and v2.0, XQuAD) as an evalkit fixture.

- :mod:`evalkit.data.squad.records`: the records of a SQuAD file (:class:`SquadDataset` and its parts) and the
  checks across them;
- :mod:`evalkit.data.squad.reading`: :func:`read_squad` reads and checks a file, strictly or forgiving what real
  files contain (:func:`forgive_squad`);
- :mod:`evalkit.data.squad.importing`: :func:`import_squad` turns one file into a monolingual fixture and
  :func:`import_cross_lingual` pairs the questions of one file with the paragraphs of a parallel file in the other
  language (XQuAD shares question IDs between languages); the mapping is described there;
- :mod:`evalkit.data.squad.languages`: :func:`~evalkit.data.squad.languages.language_note`, a cheap check that a
  file is in the language its import says.

Paragraphs are cut into sentences and chunks by :mod:`evalkit.data.chunking`; :func:`evalkit.data.fixture.write_fixture`
writes the result.
"""

from evalkit.data.squad.importing import (
    SquadImportOptions,
    find_private_paragraphs,
    import_cross_lingual,
    import_squad,
    query_id,
)
from evalkit.data.squad.reading import REPAIR_WINDOW, forgive_squad, nearest_occurrence, read_squad
from evalkit.data.squad.records import SquadDataset, SquadFormatError

__all__ = [
    "REPAIR_WINDOW",
    "SquadDataset",
    "SquadFormatError",
    "SquadImportOptions",
    "find_private_paragraphs",
    "forgive_squad",
    "import_cross_lingual",
    "import_squad",
    "nearest_occurrence",
    "query_id",
    "read_squad",
]
