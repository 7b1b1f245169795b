"""An offline demo dataset in DPR's formats, generated deterministically from a seed.

The default pipeline runs on this instead of Wikipedia + NQ, so that it can be run (and
tested) without downloads. It is built to exercise what the two papers are about:

- a corpus of titled ~100-word passages (80-120 words, 3-7 sentences) about invented
  entities of several types; most entities span two or three consecutive passages with the
  same title, like DPR's 100-word split of a longer article; continuation passages mostly
  refer to the entity as "She" or "The city", so only their title names it;
- many entities share their name with others of their type (namesakes, titled "Name
  (painter)", "Varnholm (Kestonia)"). Questions use the bare name, so a question is only
  asked about a relation that exactly one namesake's passages state: finding the gold
  passage among the namesakes' passages takes matching the relation, not the name;
- every passage sentence states a *different* fact (or is filler), so several questions
  about one passage are semantically far apart: DCSR's *one-to-many* problem;
- each question's answer occurs exactly once in the gold passage, inside exactly one
  sentence (checked with DPR's own matching rule, :func:`dcsr.answers.has_answer`), so the
  gold sentence is well defined;
- question templates paraphrase the passage templates, so the words a question shares
  with its gold sentence are mostly the entity's name;
- distractors keep it from being trivial for BM25 or an untrained encoder: namesakes, names
  sharing tokens (surnames, company and university names built from surnames and cities),
  passages mentioning other people (friends, teachers, natives, employees) by name, and
  attribute values recurring across entities.

Several *domains* (question styles, relation subsets, questions-per-passage rates) can be
generated over the one shared corpus, each with its own train/dev/test split by entity.

Everything is drawn from :class:`random.Random` instances seeded with strings derived from
the seed (hashed with SHA-512 by Python, so independent of ``PYTHONHASHSEED``): the same seed
gives byte-identical files on every run and platform.
"""

from __future__ import annotations

import math
import random
import sys
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Mapping, Sequence

from .answers import has_answer, tokens
from .errors import InputError
from .formats import QA, Passage, write_biencoder, write_corpus, write_qas

CORPUS_FILE = "psgs_w100.tsv"
MIN_WORDS, MAX_WORDS = 80, 120
MIN_SENTENCES, MAX_SENTENCES = 3, 7
N_RANDOM_NEGATIVES = 2

# --------------------------------------------------------------------------- domains


@dataclass(frozen=True)
class Domain:
    """A question domain over the shared corpus.

    ``relations`` are the relation names it asks about (``None``: all askable ones),
    ``style`` picks the question templates, ``rate`` is the mean number of questions drawn
    per passage (Poisson, capped by the facts the passage can answer).
    """

    name: str
    style: str
    rate: float
    relations: tuple[str, ...] | None = None


DOMAINS: dict[str, Domain] = {
    d.name: d
    for d in (
        Domain("encyclopedia", "formal", 3.2),
        Domain(
            "trivia",
            "terse",
            2.0,
            ("birth_date", "founded", "award", "work", "album", "length", "population", "founder",
             "singer", "students", "landmark", "source"),
        ),
        Domain(
            "chat",
            "chat",
            2.0,
            ("birth_place", "death_place", "education", "spouse", "river", "mayor", "hq", "ceo",
             "formed_in", "label", "location", "mouth", "member_of", "started", "city_on", "rector",
             "residence", "employer", "teacher", "sibling", "child", "twin", "plant", "manager"),
        ),
        # SQuAD-like: crowd workers wrote several questions per paragraph they read (as many
        # as the passage's askable facts allow).
        Domain("reading", "formal", 4.5),
        # CuratedTREC-like: few factoid questions whose answers are dates, numbers and names
        # (the miniature stand-in writes them as regular expressions, as CuratedTREC does).
        Domain(
            "trec",
            "formal",
            1.5,
            ("birth_date", "founded", "population", "students", "length", "founder", "mayor",
             "rector", "ceo", "singer", "hq", "location"),
        ),
    )
}
# The default pipeline's domains. Listed, not derived from DOMAINS: domains added for other
# uses (the miniature DPR files of dcsr.mini) must not change the demo's files or tests.
DEFAULT_DOMAINS: tuple[str, ...] = ("encyclopedia", "trivia", "chat")

# --------------------------------------------------------------------------- vocabulary

# Simple consonant-vowel syllables keep invented names pronounceable ("Varnholm", "Tesa Morell").
_ONSETS = ["b", "br", "c", "d", "f", "g", "gr", "h", "k", "l", "m", "n", "p", "r", "s", "st", "t",
           "tr", "v", "z", "th", "dr"]
_VOWELS = ["a", "e", "i", "o", "u", "a", "e", "o", "ai", "ei"]
_CODAS = ["", "", "", "", "n", "r", "l", "s", "m", "rd", "nd", "rn"]
_GIVEN_ENDS_F = ["a", "ia", "elle", "ine", "ra", "eth", "is"]
_GIVEN_ENDS_M = ["o", "an", "el", "us", "ek", "or", "im"]
_SURNAME_ENDS = ["mont", "berg", "sen", "ski", "ard", "ell", "ow", "ley", "ros", "vic", "ani", "quist"]
_CITY_ENDS = ["holm", "ford", "vik", "mar", "stad", "ica", "ova", "burg", "port", "wick", "ano", "grad"]
_COUNTRY_ENDS = ["ia", "ania", "onia", "aria"]

_ADJ = ["Silver", "Hollow", "Northern", "Quiet", "Crimson", "Glass", "Distant", "Broken", "Golden",
        "Amber", "Winter", "Salt", "Iron", "Velvet", "Paper", "Wandering", "Lost", "Painted",
        "Burning", "Pale", "Restless", "Copper", "Lonely", "Midnight", "Stone", "Electric"]
_NOUN = ["Harbour", "Orchard", "Lantern", "Meridian", "Cathedral", "Tide", "Garden", "Mirror",
         "Compass", "Horizon", "Canal", "Fable", "Archive", "Ember", "Lighthouse", "Monsoon",
         "Parade", "Citadel", "Aviary", "Quarry", "Pilgrim", "Sparrow", "Violin", "Balcony"]
_BAND_NOUNS = ["Foxes", "Kites", "Owls", "Engines", "Rivals", "Saints", "Ghosts", "Wolves",
               "Strangers", "Drifters", "Comets", "Pilots", "Ravens", "Tigers", "Sailors", "Magnets"]
_MONTHS = ["January", "February", "March", "April", "May", "June", "July", "August",
           "September", "October", "November", "December"]
_COMPANY_KINDS = ["Industries", "Group", "Works", "Holdings", "Motors", "Foods", "Shipping",
                  "Textiles", "Chemicals", "Instruments"]
_PRODUCTS = ["steam turbines", "sewing machines", "canned fish", "railway carriages", "paints",
             "radios", "bicycles", "glassware", "farm machinery", "pharmaceuticals", "typewriters",
             "cement", "paper", "ships", "porcelain"]
_GENRES = ["folk rock", "post-punk", "synth-pop", "jazz fusion", "indie pop", "hard rock",
           "dream pop", "art rock"]
_INSTRUMENTS = ["guitar", "bass", "drums", "keyboard", "violin"]
_LANDMARK_KINDS = ["Bridge", "Tower", "Cathedral", "Gate", "Fortress", "Lighthouse", "Opera House",
                   "Clock Tower", "Abbey"]
_SUBJECTS = ["law", "medicine", "chemistry", "philosophy", "engineering", "history", "mathematics",
             "architecture", "music", "painting"]

# occupation -> (kind of notable work said in passages, the paraphrase used in questions)
_OCCUPATIONS = {
    "novelist": ("novel", "book"),
    "painter": ("painting", "picture"),
    "composer": ("symphony", "piece of music"),
    "poet": ("poem", "verse"),
    "architect": ("building", "structure"),
    "physicist": ("paper", "publication"),
    "film director": ("film", "movie"),
}
_ROLE_OCCUPATIONS = {"singer": "singer", "founder": "industrialist", "mayor": "politician",
                     "ceo": "businessperson", "rector": "scholar"}

# --------------------------------------------------------------------------- templates
#
# Placeholders: {S} subject at the start of a sentence (the full name in a passage's first
# sentence, otherwise a pronoun, surname or "The city"), {N} the full name anywhere, {P}
# a capitalised possessive at the start ("His", "Velmont's"), {p} a possessive mid-sentence,
# {v} the fact's value, and context values {y} (a year), {c} (a country), {o} (occupation),
# {w} and {wq} (the kind of work in passages and in questions), {x} (a random extra).
#
# Question templates deliberately avoid the content words of the passage templates of the
# same relation ("born in" / "hometown"), so the lexical overlap is mostly the entity name.

PASSAGE_TEMPLATES: dict[tuple[str, str], list[str]] = {
    ("person", "birth_place"): [
        "{S} was born in {v}, where {p} father kept a small bakery near the harbour.",
        "A native of {v}, {N} spent {p} early years among the workshops of the lower town.",
        "{S} came from {v}, a place {p} family had lived in for several generations.",
    ],
    ("person", "birth_date"): [
        "{S} was born on {v}, the youngest of four children.",
        "{P} birth, on {v}, was recorded in the parish register by a local priest.",
        "{S} arrived on {v}, during a winter that the family would remember for years.",
    ],
    ("person", "death_place"): [
        "{S} died in {v} in {y}, after a long illness.",
        "{P} final years were spent in {v}, where {pr} died in {y}.",
        "{S} passed {p} last days quietly in {v} and was buried in the town cemetery.",
    ],
    ("person", "education"): [
        "{S} studied {x} at {v} before returning home.",
        "{S} graduated from {v} in {y} with a degree in {x}.",
        "{S} trained at {v}, where {pr} read {x} under several demanding teachers.",
    ],
    ("person", "award"): [
        "{S} received the {v} in {y} for {p} contribution to the field.",
        "In {y}, {N} was honoured with the {v}.",
        "{P} later work earned {o_obj} the {v}, which {pr} accepted in person.",
    ],
    ("person", "spouse"): [
        "{S} married {v} in {y}, and the couple settled outside the city.",
        "{S} was married to {v}, who shared {p} interest in old maps.",
        "In {y}, {N} wed {v} in a small private ceremony.",
    ],
    ("person", "work"): [
        "{P} best-known {w} is {v}, which was completed in {y}.",
        "{S} is remembered above all for the {w} {v}.",
        "Among {p} works, the {w} {v} is the one most often discussed by critics.",
    ],
    ("person", "member_of"): [
        "{S} joined {v} in {y} as its singer and wrote most of its lyrics.",
        "{S} sang with {v} for more than a decade.",
        "For many years {N} was the voice of {v}, touring widely with the group.",
    ],
    ("person", "started"): [
        "{S} set up {v} in {y} with money borrowed from relatives.",
        "{S} established the firm {v}, which grew quickly in the following decade.",
        "With two partners, {N} created {v} in a rented warehouse.",
    ],
    ("person", "employer"): [
        "{S} worked for {v} for several years after leaving school.",
        "For a time {N} was on the staff of {v}, earning a modest salary.",
        "In {y}, {N} took a post at {v} as a junior clerk.",
    ],
    ("person", "residence"): [
        "{S} lived in {v} for most of {p} adult life.",
        "For several decades {N} kept a flat in {v}, above a bookshop.",
        "{S} settled in {v}, where {pr} bought an old farmhouse.",
    ],
    ("person", "teacher"): [
        "{S} was a pupil of {v}, who shaped {p} early style.",
        "{P} most important teacher was {v}.",
        "As a young student, {N} learned the basics from {v}.",
    ],
    ("person", "sibling"): [
        "{S} grew up alongside {v}, the elder of the two children.",
        "{S} remained close to {p} twin, {v}, throughout {p} life.",
        "{S} and {v} were raised together by their grandparents.",
    ],
    ("person", "child"): [
        "{S} had one child, {v}, who later moved abroad.",
        "{P} only child, {v}, was born in {y}.",
        "{S} raised {p} child {v} largely alone.",
    ],
    ("city", "founded"): [
        "{S} was founded in {v} by merchants from the coast.",
        "The first settlement at {N} dates from {v}, when a fort was built on the hill.",
        "{S} received its town charter in {v} from the reigning duke.",
    ],
    ("city", "river"): [
        "{S} lies on the banks of the {v}, which divides the old and new quarters.",
        "The {v} runs through the centre of {N} and is crossed by several bridges.",
        "{S} grew up around a ford on the {v}.",
    ],
    ("city", "mayor"): [
        "{S} is governed by a council led by mayor {v}.",
        "Since {y}, the city has been led by {v}, who was re-elected twice.",
        "The current mayor of {N}, {v}, has promised to expand the tram network.",
    ],
    ("city", "landmark"): [
        "{P} best-known landmark is the {v}, which appears on many postcards.",
        "Visitors to {N} usually head first to the {v}, built in the old town.",
        "The {v} dominates the skyline of {N}.",
    ],
    ("city", "population"): [
        "{S} has a population of about {v}, most of whom live near the centre.",
        "Around {v} people live in {N} according to the latest census.",
        "The census counted {v} residents in {N}, a figure that has grown slowly.",
    ],
    ("person", "friend"): [
        "{S} was a lifelong friend of {v}, with whom {pr} shared a flat for years.",
        "{P} closest friend was {v}.",
        "{S} and {v} were inseparable from their school days onward.",
    ],
    ("person", "patron"): [
        "{P} patron was {v}, a wealthy collector.",
        "The collector {v} paid {p} rent for almost a decade.",
        "For years {N} depended on the generosity of {v}.",
    ],
    ("city", "twin"): [
        "{S} has been twinned with {v} since {y}.",
        "An agreement signed in {y} links {N} with {v}.",
        "{S} maintains close official ties with {v}, exchanging school groups every spring.",
    ],
    ("river", "source"): [
        "{S} rises in the {v} and flows through several narrow valleys.",
        "The springs that feed {N} lie high in the {v}.",
        "{S} begins as a small stream in the {v}.",
    ],
    ("river", "mouth"): [
        "{S} empties into the {v} after passing a wide delta.",
        "After a long course, {N} reaches the {v} near a fishing village.",
        "{S} finally drains into the {v}.",
    ],
    ("river", "length"): [
        "{S} runs for {v} from its springs to the sea.",
        "Over its course of {v}, {N} passes farms, mills and forests.",
        "{S} measures {v} in total and is navigable for much of it.",
    ],
    ("river", "city_on"): [
        "The largest city on {p} banks is {v}, where the valley widens.",
        "{S} flows past {v}, the main town along its course.",
        "Barges still carry goods along {N} to the docks of {v}.",
    ],
    ("company", "founder"): [
        "{S} was established by {v} as a small family workshop.",
        "The business behind {N} was started by {v}, a former clerk.",
        "{v} set up {N} with a loan from a local bank.",
    ],
    ("company", "founded"): [
        "{S} began trading in {v} and opened its first factory soon after.",
        "The firm was registered in {v}, initially with six employees.",
        "{S} has operated since {v}, surviving two major recessions.",
    ],
    ("company", "hq"): [
        "{S} is headquartered in {v}, in a tall glass building by the station.",
        "{P} head office is in {v}, although most production happens elsewhere.",
        "{S} keeps its main offices in {v}.",
    ],
    ("company", "ceo"): [
        "Since {y}, the company has been run by chief executive {v}.",
        "{S} is managed by {v}, who took over from the founding family.",
        "The firm's chief executive, {v}, has expanded its export business.",
    ],
    ("company", "plant"): [
        "{P} main plant stands on the edge of {v}.",
        "Production is concentrated at a large works in {v}.",
        "Most of what the firm sells is assembled in {v}.",
    ],
    ("band", "manager"): [
        "{S} is managed by {v}, a former concert promoter.",
        "Since {y}, {v} has handled the group's bookings and contracts.",
        "The band's affairs are run by {v}, who discovered them at a pub concert.",
    ],
    ("band", "formed_in"): [
        "{S} formed in {v} in {y}, playing small clubs at first.",
        "The group got together in {v} while its members were still students.",
        "{S} started out in the bars of {v}.",
    ],
    ("band", "founded"): [
        "{S} first performed in {v}, at a school dance.",
        "The group played its first concert in {v}.",
        "{S} made its live debut in {v} to a crowd of about forty people.",
    ],
    ("band", "singer"): [
        "{S} is fronted by vocalist {v}, who also writes most of the lyrics.",
        "The group's vocals are handled by {v}.",
        "{v} sings for the group and plays rhythm guitar on stage.",
    ],
    ("band", "album"): [
        "{P} first record, {v}, appeared in {y} to modest reviews.",
        "The group released its first record, {v}, in {y}.",
        "{S} recorded {v}, its first record, in a converted barn.",
    ],
    ("band", "label"): [
        "{S} signed with {v} in {y}.",
        "The group's records are issued by {v}.",
        "After years of touring, {N} signed a contract with {v}.",
    ],
    ("university", "location"): [
        "{S} is located in {v}, on a hill above the river.",
        "The campus of {N} lies in {v}, close to the main square.",
        "{S} occupies several old buildings in central {v}.",
    ],
    ("university", "founded"): [
        "{S} opened its doors in {v} with only three faculties.",
        "The institution was established in {v} by royal decree.",
        "Teaching at {N} began in {v}, in a former monastery.",
    ],
    ("university", "rector"): [
        "{S} is led by rector {v}, a former professor of {x}.",
        "Since {y}, {v} has served as rector of the institution.",
        "The current rector, {v}, has opened two new faculties.",
    ],
    ("university", "students"): [
        "{S} enrols about {v} students each year.",
        "Around {v} students attend {N}.",
        "{S} has a student body of roughly {v}.",
    ],
}

# The first sentence of an article: it names the entity and its type, like Wikipedia.
INTRO_TEMPLATES: dict[str, list[str]] = {
    "person": ["{N} is {a_c_adj} {o} whose career spanned several decades.",
               "{N} was {a_c_adj} {o} who became widely known during the {decade}s.",
               "{N} is {a_o} from {c}, often described as one of the most original of {p} generation."],
    "city": ["{N} is a city in {c}, known for its markets and its old stone bridges.",
             "{N} is a town in the north of {c} with a long history of trade.",
             "{N} is one of the larger cities of {c} and an important regional centre."],
    "river": ["{N} is a river in {c}, important for farming and fishing along its valley.",
              "{N} is one of the main rivers of {c}."],
    "company": ["{N} is {a_c_adj} manufacturer of {x}.",
                "{N} is a company from {c} that makes {x}."],
    "band": ["{N} is {a_c_adj} {x} band.",
             "{N} is a {x} band from {c}, popular with younger listeners."],
    "university": ["{N} is a public university in {c}.",
                   "{N} is a research university in {c} with a strong regional reputation."],
}

# Prose without facts, so passages read as prose and share common words across entities.
FILLERS: dict[str, list[str]] = {
    "person": [
        "{S} was known for a quiet and careful manner, rarely gave interviews to the press and avoided public debates.",
        "Critics have praised {p} work for its clarity and patience, although some reviewers found it too restrained.",
        "During the following years {pr} travelled widely across the continent and kept detailed diaries of each journey.",
        "{S} corresponded with many artists and scientists of the time, and hundreds of these letters survive in archives.",
        "{P} reputation grew slowly, and much of {p} influence on younger colleagues was recognised only after some decades.",
        "Friends remembered {o_obj} as generous, stubborn and unusually hard working, often at the expense of {p} health.",
        "In later life {pr} gave much of {p} time to teaching, and several of {p} former pupils became well known themselves.",
    ],
    "city": [
        "The old town has narrow cobbled streets, several covered markets and a number of churches from different periods.",
        "The city has a mild climate with wet, windy winters and warm, dry summers that attract many visitors.",
        "Local industry was once based on weaving, tanning and brewing, but today services and tourism dominate the economy.",
        "A regional railway line connects the city with the capital and the coast, and buses serve the surrounding villages.",
        "The surrounding countryside is known for its orchards, vineyards and small family farms that supply the local markets.",
        "Every summer the town hosts a music festival that draws performers and visitors from abroad for several weeks.",
        "Large parts of the centre were rebuilt after a fire in the nineteenth century, which explains its regular street plan.",
    ],
    "river": [
        "The river has long been important for local farming and has been used for irrigation for many centuries.",
        "Several dams were built along the river during the last century to produce electricity and to control the water level.",
        "Its valley is home to many species of birds and fish, and parts of it are protected as a nature reserve.",
        "Floods were common in the past, and high embankments now protect most of the towns and villages along its banks.",
        "The water is popular with anglers, who come for trout and pike in the upper stretches during the summer months.",
        "Old mills and stone bridges still stand along much of its course, and some have been restored as museums.",
    ],
    "company": [
        "The company expanded abroad after the war and now sells its products in many countries across several continents.",
        "Its factories have been modernised several times over the decades, most recently with highly automated production lines.",
        "The firm has been criticised by trade unions over working conditions and wages in some of its older plants.",
        "Sales grew steadily during the following decades, helped by a series of acquisitions of smaller local competitors.",
        "The company also sponsors a local football club, a youth orchestra and several cultural events in the region.",
        "Shares of the company have been traded on the national stock exchange for many years, and the family still holds a stake.",
    ],
    "band": [
        "The group has toured widely in Europe and abroad and is known for its long, energetic and loud live shows.",
        "Critics have compared their sound with that of several older bands from the region, which the members have welcomed.",
        "The line-up has changed several times over the years, but the core members have always stayed together.",
        "Their songs often deal with small-town life, long journeys, lost friendships and the changing of the seasons.",
        "The group took a long break in the middle of its career before returning to the studio with a new producer.",
        "Several of their songs have been used in films and television series, which brought them a much wider audience.",
    ],
    "university": [
        "The university is organised into several faculties and offers degrees at every level, from bachelor to doctorate.",
        "Its library holds a large collection of manuscripts, maps and early printed books that attracts visiting scholars.",
        "The institution has exchange partnerships with universities in many other countries and welcomes students from abroad.",
        "Student life centres on the old main building, the gardens around it and the many cafes of the nearby streets.",
        "Research at the institution is funded partly by the state and partly by industry, especially in the applied sciences.",
        "The university also runs a botanical garden and a small museum, both of which are open to the public.",
    ],
}

# Sentences that mention another entity in passing, so its name appears in passages that
# cannot answer questions about it (the "rival" is usually someone with a similar name).
MENTIONS: dict[str, list[str]] = {
    "person": [
        "{P} great rival was {R}, whose work was often shown and discussed alongside {p} own.",
        "{S} was often confused with {R}, a contemporary with a similar name and a very different style.",
        "{S} worked closely with {R} and {R2} for several years, and the three remained lifelong friends.",
        "Among those who admired {p} work was {R}, who later wrote a warm account of their long friendship.",
    ],
    "city": [
        "{S} has long competed with the nearby town of {R} for trade, investment and visitors.",
        "The main road to {R} passes through the eastern suburbs of the city and is often congested.",
    ],
    "river": ["{S} is often compared with the {R}, which drains a neighbouring valley further to the east."],
    "company": ["Its main competitor is {R}, which makes similar products and sells them at lower prices.",
                "{S} once considered a merger with its rival {R}, but the talks failed after several months."],
    "band": ["The group has often toured with {R}, with whom it shares a producer and several session musicians.",
             "{S} is sometimes mistaken for {R}, a band with a similar name and a rather similar sound."],
    "university": ["{S} competes with {R} for students, staff and research funding from the state.",
                   "Many of its professors previously taught at {R}, and the two institutions share a library."],
}

# Sentences naming two people linked to the entity (``{L1}``, ``{L2}``).
LINK_MENTIONS: dict[str, list[str]] = {
    "city": ["Well-known natives of the city include {L1} and {L2}, among many others.",
             "Among the people who grew up in the city are {L1} and {L2}."],
    "university": ["Its alumni include {L1} and {L2}, both of whom later became well known.",
                   "Former students of the institution include {L1} and {L2}."],
    "company": ["Both {L1} and {L2} worked at the company for some years before moving on.",
                "Former employees of the firm include {L1} and {L2}."],
}

# Question templates per (relation, style); {N} is the entity's full name, {wq} the
# question-side paraphrase of the kind of work.
QUESTION_TEMPLATES: dict[str, dict[str, list[str]]] = {
    "birth_place": {
        "formal": ["What is the hometown of {N}?", "In which city did {N} enter the world?",
                   "Which city is the birthplace of {N}?"],
        "terse": ["{N} birthplace?", "Hometown of {N}?"],
        "chat": ["hey, where is {N} originally from?", "do you know what town {N} grew up in?"],
    },
    "birth_date": {
        "formal": ["On what day did {N} come into the world?", "What is the date of {N}'s nativity?"],
        "terse": ["{N} birthday?", "Birthday of {N}?"],
        "chat": ["when's {N}'s birthday, do you know?", "what day does {N} celebrate as a birthday?"],
    },
    "death_place": {
        "formal": ["Where did {N} pass away?", "In which city did {N}'s life end?"],
        "terse": ["{N} place of death?", "Where did {N} perish?"],
        "chat": ["where did {N} end up dying?", "do you know where {N} spent the end of their life?"],
    },
    "education": {
        "formal": ["Which university did {N} attend?", "At which institution was {N} educated?"],
        "terse": ["{N} alma mater?", "{N} attended which school?"],
        "chat": ["what college did {N} go to?", "where did {N} go to school?"],
    },
    "award": {
        "formal": ["Which distinction was conferred on {N}?", "What prize was awarded to {N}?"],
        "terse": ["{N} won what prize?", "Award won by {N}?"],
        "chat": ["did {N} ever win anything big?", "what award did {N} get?"],
    },
    "spouse": {
        "formal": ["Who was the spouse of {N}?", "To whom was {N} joined in matrimony?"],
        "terse": ["{N} spouse?", "Partner of {N}?"],
        "chat": ["who did {N} end up marrying?", "who's {N}'s husband or wife?"],
    },
    "work": {
        "formal": ["Which {wq} is {N} most famous for?", "What is the most celebrated {wq} by {N}?"],
        "terse": ["{N}'s signature {wq}?", "Famous {wq} by {N}?"],
        "chat": ["what's the {wq} everyone knows {N} for?", "which {wq} made {N} famous?"],
    },
    "member_of": {
        "formal": ["Which musical group featured {N} as vocalist?", "Of which band was {N} the lead voice?"],
        "terse": ["{N}'s band?", "Band fronted by {N}?"],
        "chat": ["what band is {N} in?", "which group does {N} front?"],
    },
    "started": {
        "formal": ["Which business did {N} launch?", "What enterprise owes its creation to {N}?"],
        "terse": ["Business launched by {N}?", "{N} created what enterprise?"],
        "chat": ["what company did {N} start?", "which business is {N} behind?"],
    },
    "employer": {
        "formal": ["Which firm employed {N}?", "By which enterprise was {N} employed?"],
        "terse": ["{N} employer?", "Employer of {N}?"],
        "chat": ["who did {N} use to work for?", "who paid {N}'s wages back then?"],
    },
    "residence": {
        "formal": ["In which city did {N} reside?", "Where did {N} dwell as a grown-up?"],
        "terse": ["{N} residence?", "Residence of {N}?"],
        "chat": ["where did {N} end up living?", "which town was {N}'s home as a grown-up?"],
    },
    "teacher": {
        "formal": ["Who mentored {N}?", "Under whose guidance did {N} acquire the craft?"],
        "terse": ["{N} mentor?", "Mentor of {N}?"],
        "chat": ["who taught {N}?", "who was {N}'s mentor?"],
    },
    "sibling": {
        "formal": ["Who is the brother or sister of {N}?", "Which person shared parents with {N}?"],
        "terse": ["{N} sibling?", "Sibling of {N}?"],
        "chat": ["does {N} have a brother or sister?", "who's {N}'s brother or sister?"],
    },
    "child": {
        "formal": ["What is the name of {N}'s offspring?", "Who is the descendant of {N}?"],
        "terse": ["{N} offspring?", "Offspring of {N}?"],
        "chat": ["what's the name of {N}'s kid?", "who is {N}'s kid?"],
    },
    "friend": {
        "formal": ["Who was {N}'s dearest companion?", "With whom did {N} have the strongest bond?"],
        "terse": ["{N} companion?", "Companion of {N}?"],
        "chat": ["who was {N}'s best buddy?", "who did {N} hang out with most?"],
    },
    "patron": {
        "formal": ["Who funded the career of {N}?", "Who was the benefactor of {N}?"],
        "terse": ["{N} benefactor?", "Benefactor of {N}?"],
        "chat": ["who bankrolled {N}?", "who paid {N}'s bills?"],
    },
    "twin": {
        "formal": ["Which partner city does {N} have?", "With which municipality is {N} paired?"],
        "terse": ["{N} partner city?", "Partner city of {N}?"],
        "chat": ["which place is {N} paired up with?", "who's {N}'s partner city?"],
    },
    "plant": {
        "formal": ["In which city does {N} manufacture its goods?", "Where are {N}'s products made?"],
        "terse": ["{N} factory location?", "Factory of {N}?"],
        "chat": ["where does {N} make its stuff?", "where's {N}'s factory?"],
    },
    "manager": {
        "formal": ["Who handles the business affairs of {N}?", "Who is responsible for the career of {N}?"],
        "terse": ["{N} manager?", "Manager of {N}?"],
        "chat": ["who manages {N}?", "who's {N}'s manager?"],
    },
    "founded": {
        "formal": ["In what year was {N} founded?", "When did {N} come into existence?"],
        "terse": ["{N} year of origin?", "Year {N} originated?"],
        "chat": ["how old is {N}, like what year did it start?", "when did {N} get going?"],
    },
    "river": {
        "formal": ["Which waterway flows past {N}?", "On what watercourse is {N} situated?"],
        "terse": ["Waterway of {N}?", "{N} sits on which waterway?"],
        "chat": ["what's the river that goes by {N}?", "which stream passes {N}?"],
    },
    "mayor": {
        "formal": ["Who heads the municipal government of {N}?", "Who holds the top civic office in {N}?"],
        "terse": ["{N} civic head?", "Head of {N}'s municipality?"],
        "chat": ["who's in charge of {N} these days?", "who runs {N}?"],
    },
    "landmark": {
        "formal": ["What famous structure is found in {N}?", "Which monument is {N} celebrated for?"],
        "terse": ["{N}'s iconic sight?", "Famous monument in {N}?"],
        "chat": ["what should I go see in {N}?", "what's the must-see sight in {N}?"],
    },
    "population": {
        "formal": ["How many inhabitants does {N} have?", "What is the size of the populace of {N}?"],
        "terse": ["{N} inhabitants?", "Number of inhabitants of {N}?"],
        "chat": ["how many folks call {N} home?", "how big is {N}, like headcount?"],
    },
    "source": {
        "formal": ["Where does {N} originate?", "In which range is the origin of {N}?"],
        "terse": ["{N} origin?", "Where does {N} start?"],
        "chat": ["where does {N} start from?", "which mountains does {N} come out of?"],
    },
    "mouth": {
        "formal": ["Into which body of water does {N} discharge?", "Where does {N} terminate?"],
        "terse": ["{N} outflow?", "{N} discharges where?"],
        "chat": ["where does {N} end up?", "what does {N} flow out to?"],
    },
    "length": {
        "formal": ["What is the length of {N}?", "How far does {N} extend?"],
        "terse": ["{N} length?", "Length of {N}?"],
        "chat": ["how long is {N}?", "how far does {N} go, distance-wise?"],
    },
    "city_on": {
        "formal": ["Which major town is situated along {N}?", "What is the principal settlement beside {N}?"],
        "terse": ["Main town on {N}?", "Biggest settlement along {N}?"],
        "chat": ["what's the big city on {N}?", "which town sits by {N}?"],
    },
    "founder": {
        "formal": ["Who created {N}?", "Who is credited with launching {N}?"],
        "terse": ["{N} creator?", "Who launched {N}?"],
        "chat": ["who started {N}?", "whose idea was {N}?"],
    },
    "hq": {
        "formal": ["In which city is {N} based?", "Where is the corporate seat of {N}?"],
        "terse": ["{N} base city?", "Seat of {N}?"],
        "chat": ["where is {N} based?", "which city is {N} located in?"],
    },
    "ceo": {
        "formal": ["Who leads {N}?", "Who is at the helm of {N}?"],
        "terse": ["{N} boss?", "Head of {N}?"],
        "chat": ["who's the boss at {N}?", "who is in charge of {N}?"],
    },
    "formed_in": {
        "formal": ["In which city did {N} originate?", "What is the hometown of {N}?"],
        "terse": ["{N} hometown?", "{N} hail from where?"],
        "chat": ["where are {N} from?", "what city did {N} come out of?"],
    },
    "singer": {
        "formal": ["Who is the lead vocalist of {N}?", "Whose voice leads {N}?"],
        "terse": ["{N} frontman or frontwoman?", "Lead voice of {N}?"],
        "chat": ["who's the singer in {N}?", "who sings lead in {N}?"],
    },
    "album": {
        "formal": ["What was the title of {N}'s debut album?", "What was the debut LP of {N}?"],
        "terse": ["{N} debut album?", "Debut LP by {N}?"],
        "chat": ["what was {N}'s debut album called?", "what's the name of the debut LP by {N}?"],
    },
    "label": {
        "formal": ["Which record label has published {N}?", "Under which label does {N} publish music?"],
        "terse": ["{N} label?", "Label of {N}?"],
        "chat": ["what label are {N} on?", "who puts out {N}'s music?"],
    },
    "location": {
        "formal": ["In which city is {N} situated?", "Where is the campus of {N}?"],
        "terse": ["{N} city?", "Where's {N}?"],
        "chat": ["where is {N}?", "what city is {N} in?"],
    },
    "rector": {
        "formal": ["Who heads {N}?", "Who is the chief academic officer of {N}?"],
        "terse": ["{N} head?", "Head of {N}?"],
        "chat": ["who runs {N}?", "who's in charge at {N}?"],
    },
    "students": {
        "formal": ["How large is the enrolment of {N}?", "How many pupils are registered at {N}?"],
        "terse": ["{N} enrolment?", "Enrolment at {N}?"],
        "chat": ["how many kids go to {N}?", "how big is {N}, enrolment-wise?"],
    },
}

# Entity mix per n_entities. Namesakes, many multi-passage articles and relation-only
# disambiguation keep BM25 and an untrained MiniLM far from solving the default demo (600
# entities: top-5 about 69% and 78%), while a bi-encoder can learn the relation paraphrases.
_TYPE_SHARES = {"person": 0.56, "city": 0.15, "river": 0.05, "company": 0.1, "band": 0.07, "university": 0.07}
# Share of each type's entities that take the name of another one, and the largest group;
# articles with at least _LONG_MIN_FACTS facts are split into 2 passages when "long" (3 from
# _THREE_PASSAGE_MIN_FACTS facts on).
_NAMESAKE_SHARE = {"person": 0.78, "city": 0.55, "river": 0.5, "company": 0.55, "band": 0.55, "university": 0.5}
_MAX_NAMESAKES = {"person": 7, "city": 4, "river": 4, "company": 4, "band": 4, "university": 4}
_LONG_MIN_FACTS, _THREE_PASSAGE_MIN_FACTS = 3, 4
_LONG_ARTICLE_SHARE = {"person": 0.85, "city": 0.8, "river": 0.6, "company": 0.8, "band": 0.8, "university": 0.8}

# --------------------------------------------------------------------------- data classes


@dataclass
class Entity:
    id: int
    type: str
    name: str
    facts: dict[str, str] = field(default_factory=dict)  # relation -> value (answer string)
    ctx: dict[str, str] = field(default_factory=dict)  # template context (country, occupation, ...)
    gender: str = "n"
    surname: str = ""
    long: bool = False
    years: tuple[int, int] = (1900, 2015)  # range of the incidental years its passages mention
    title: str = ""  # the article title: the name, disambiguated for homonyms
    links: list[str] = field(default_factory=list)  # people it can mention (natives, alumni, ...)
    homonym: bool = False  # another entity has the same name

    @property
    def question_name(self) -> str:
        """How questions refer to the entity: by its bare name, as people ask. A homonym is
        only asked about a relation that none of its namesakes' passages states."""
        return self.name


@dataclass(frozen=True)
class Fact:
    relation: str
    answer: str
    sentence: int  # index of the sentence stating it within the passage


@dataclass
class DemoPassage:
    """A corpus passage with the sentence list it was assembled from (the gold segmentation)."""

    id: int
    title: str
    entity: int
    sentences: list[str]
    facts: list[Fact]  # the facts it can answer: answer exactly once, in one sentence

    @property
    def text(self) -> str:
        return " ".join(self.sentences)

    def sentence_spans(self) -> list[tuple[int, int]]:
        """Character spans ``(start, end)`` of the sentences in :attr:`text`."""
        spans, pos = [], 0
        for s in self.sentences:
            spans.append((pos, pos + len(s)))
            pos += len(s) + 1
        return spans


@dataclass(frozen=True)
class DemoQuestion:
    question: str
    answers: tuple[str, ...]
    passage_id: int
    sentence: int  # gold sentence index within the passage
    entity: int
    relation: str


@dataclass
class DemoData:
    passages: list[DemoPassage]
    entities: list[Entity]
    # domain -> split ("train", "dev", "test") -> questions
    questions: dict[str, dict[str, list[DemoQuestion]]]
    # (domain, split, question index) -> random negative passage ids, train/dev only
    negatives: dict[tuple[str, str, int], list[int]]

    def passage(self, pid: int) -> DemoPassage:
        return self.passages[pid - 1]


# --------------------------------------------------------------------------- names


class _Names:
    """Invented names from syllables; every full name handed out is unique."""

    def __init__(self, rng: random.Random):
        self.rng = rng
        self.used: set[str] = set()

    def root(self, syllables: int | None = None) -> str:
        rng = self.rng
        n = syllables or rng.choice((1, 2, 2))
        s = "".join(rng.choice(_ONSETS) + rng.choice(_VOWELS) + rng.choice(_CODAS) for _ in range(n))
        return s.capitalize()

    def unique(self, make: Callable[[], str]) -> str:
        for _ in range(1000):
            name = make()
            if name not in self.used and len(name) >= 4:
                self.used.add(name)
                return name
        raise RuntimeError("name space exhausted")  # cannot happen at the supported sizes


def _date(rng: random.Random, lo: int, hi: int) -> str:
    return f"{rng.randint(1, 28)} {rng.choice(_MONTHS)} {rng.randint(lo, hi)}"


def _count(rng: random.Random, lo: int, hi: int) -> str:
    return f"{rng.randrange(lo, hi, 100):,}"


# --------------------------------------------------------------------------- the world


def _build_world(rng: random.Random, n_entities: int) -> list[Entity]:
    """Entities with consistent cross-references (a mayor is a person entity, ...)."""
    names = _Names(rng)
    counts = {t: max(2, round(n_entities * s)) for t, s in _TYPE_SHARES.items()}
    counts["person"] += n_entities - sum(counts.values())

    countries = [names.unique(lambda: names.root(rng.choice((1, 2))).rstrip("aeiouy") + rng.choice(_COUNTRY_ENDS))
                 for _ in range(40)]
    country_adj = {c: c + "n" for c in countries}
    # Small pools of name parts, so that many entities share tokens with each other.
    n_person = counts["person"]
    givens = {g: [names.unique(lambda: names.root(1) + rng.choice(_GIVEN_ENDS_F if g == "f" else _GIVEN_ENDS_M))
                  for _ in range(max(8, n_person // 8))] for g in ("f", "m")}
    surnames = [names.unique(lambda: names.root(rng.choice((1, 1, 2))) + rng.choice(_SURNAME_ENDS))
                for _ in range(max(6, n_person // 5))]
    mountains = [f"{names.unique(lambda: names.root())} {rng.choice(['Mountains', 'Hills', 'Highlands'])}"
                 for _ in range(30)]
    seas = [rng.choice([f"{names.unique(lambda: names.root())} Sea", f"Gulf of {names.unique(lambda: names.root())}"])
            for _ in range(15)]

    entities: list[Entity] = []

    def add(etype: str, name: str, **kw) -> Entity:
        e = Entity(id=len(entities), type=etype, name=name, **kw)
        e.ctx["c"] = rng.choice(countries)
        e.ctx["c_adj"] = country_adj[e.ctx["c"]]
        e.ctx["a_c_adj"] = ("an " if e.ctx["c_adj"][0] in "AEIOU" else "a ") + e.ctx["c_adj"]
        e.long = rng.random() < _LONG_ARTICLE_SHARE[etype]
        entities.append(e)
        return e

    persons: list[Entity] = []
    for _ in range(counts["person"]):
        g = rng.choice("fm")
        sur = rng.choice(surnames)
        name = names.unique(lambda: f"{rng.choice(givens[g])} {sur}")
        persons.append(add("person", name, gender=g, surname=sur))
    _share_names(persons, rng, _NAMESAKE_SHARE["person"], _MAX_NAMESAKES["person"])
    # Prizes are often named after people, so "the Tesa Morell Prize" puts Tesa Morell's
    # full name into the passages of everyone who won it.
    awards = sorted({f"{rng.choice([names.root(), rng.choice(surnames), rng.choice(persons).name])} "
                     f"{rng.choice(['Prize', 'Medal', 'Award', 'Cross'])}" for _ in range(60)})
    cities = [add("city", names.unique(lambda: names.root() + rng.choice(_CITY_ENDS))) for _ in range(counts["city"])]
    _share_names(cities, rng, _NAMESAKE_SHARE["city"], _MAX_NAMESAKES["city"])
    rivers = [add("river", names.unique(lambda: f"{names.root()} River")) for _ in range(counts["river"])]
    _share_names(rivers, rng, _NAMESAKE_SHARE["river"], _MAX_NAMESAKES["river"])
    companies = [
        add("company", names.unique(lambda: f"{rng.choice([rng.choice(surnames), rng.choice(cities).name])} "
                                           f"{rng.choice(_COMPANY_KINDS)}"))
        for _ in range(counts["company"])
    ]
    _share_names(companies, rng, _NAMESAKE_SHARE["company"], _MAX_NAMESAKES["company"])
    bands = [add("band", names.unique(lambda: f"The {rng.choice(_ADJ)} {rng.choice(_BAND_NOUNS)}"))
             for _ in range(counts["band"])]
    _share_names(bands, rng, _NAMESAKE_SHARE["band"], _MAX_NAMESAKES["band"])
    universities = [
        add("university", names.unique(lambda: rng.choice([
            f"University of {rng.choice(cities).name}",
            f"{rng.choice(surnames)} University",
            f"{rng.choice(cities).name} Institute of Technology",
        ])))
        for _ in range(counts["university"])
    ]
    _share_names(universities, rng, _NAMESAKE_SHARE["university"], _MAX_NAMESAKES["university"])

    born = {p.id: rng.randint(1945, 1995) if rng.random() < 0.55 else rng.randint(1820, 1944) for p in persons}
    # Present-day roles (mayor since 2005, ...) go to people born after 1945.
    persons_by_era = {modern: [p for p in persons if (born[p.id] >= 1945) == modern] for modern in (False, True)}
    free = {modern: list(pool) for modern, pool in persons_by_era.items()}
    for pool in free.values():
        rng.shuffle(pool)

    def take_person(role: str, modern: bool) -> Entity:
        # Each role-holder is a different person, so the role fact is unique to them.
        # When the pool runs dry a person holds two roles, which is plausible enough.
        p = free[modern].pop() if free[modern] else rng.choice(persons_by_era[modern])
        p.ctx.setdefault("role", role)
        return p

    for c in cities:
        c.years = (1990, 2020)  # "led by mayor X since {y}"
        c.facts["founded"] = str(rng.randint(900, 1700))
        if rivers and rng.random() < 0.8:
            c.facts["river"] = rng.choice(rivers).name
        c.facts["mayor"] = take_person("mayor", True).name
        c.facts["landmark"] = f"{rng.choice([names.root(), c.name, rng.choice(persons).name])} {rng.choice(_LANDMARK_KINDS)}"
        c.facts["population"] = _count(rng, 8_000, 900_000)
        twin = rng.choice(cities)
        if twin.name != c.name and rng.random() < 0.7:
            c.facts["twin"] = twin.name
    for r in rivers:
        r.facts["source"] = rng.choice(mountains)
        r.facts["mouth"] = rng.choice(seas)
        r.facts["length"] = f"{rng.randint(40, 1900)} kilometres"
        r.facts["city_on"] = rng.choice(cities).name
    for co in companies:
        founder = take_person("founder", rng.random() < 0.3)
        co.facts["founder"] = founder.name
        founder.facts["started"] = co.name
        co.facts["founded"] = str(min(2015, born[founder.id] + rng.randint(22, 45)))
        co.years = (int(co.facts["founded"]) + 5, 2022)
        co.facts["hq"] = rng.choice(cities).name
        co.facts["ceo"] = take_person("ceo", True).name
        co.ctx["x"] = rng.choice(_PRODUCTS)
        if rng.random() < 0.7:
            co.facts["plant"] = rng.choice(cities).name
    labels = companies[: max(1, len(companies) // 4)]
    for b in bands:
        singer = take_person("singer", True)
        b.facts["singer"] = singer.name
        singer.facts["member_of"] = b.name
        b.facts["formed_in"] = rng.choice(cities).name
        b.facts["founded"] = str(min(2012, max(1960, born[singer.id] + rng.randint(17, 30))))
        b.years = (int(b.facts["founded"]) + 1, int(b.facts["founded"]) + 8)
        b.facts["album"] = f"{rng.choice(_ADJ)} {rng.choice(_NOUN)}"
        b.facts["label"] = rng.choice(labels).name
        b.ctx["x"] = rng.choice(_GENRES)
        if rng.random() < 0.7:
            b.facts["manager"] = rng.choice(persons).name
    for u in universities:
        u.facts["location"] = rng.choice(cities).name
        u.facts["founded"] = str(rng.randint(1300, 1990))
        u.years = (1990, 2022)
        u.facts["rector"] = take_person("rector", True).name
        u.facts["students"] = _count(rng, 1_500, 60_000)
        u.ctx["x"] = rng.choice(_SUBJECTS)
    by_surname: dict[str, list[Entity]] = defaultdict(list)
    for p in persons:
        by_surname[p.surname].append(p)
    namesakes: dict[str, list[Entity]] = defaultdict(list)
    for p in persons:
        namesakes[p.name].append(p)
    for p in persons:
        if p.ctx.get("role"):
            p.ctx["o"] = _ROLE_OCCUPATIONS[p.ctx["role"]]
    for p in persons:
        if "o" not in p.ctx:
            taken = {q.ctx.get("o") for q in namesakes[p.name]}
            p.ctx["o"] = rng.choice([o for o in sorted(_OCCUPATIONS) if o not in taken] or sorted(_OCCUPATIONS))
    linked: dict[tuple[int, str], Entity] = {}
    for p in persons:
        occupation = p.ctx["o"]
        p.ctx["a_o"] = ("an " if occupation[0] in "aeiou" else "a ") + occupation
        p.years = (born[p.id] + 18, min(born[p.id] + 75, 2022))
        p.ctx["decade"] = str(born[p.id] + 30 - (born[p.id] + 30) % 10)
        linked[(p.id, "birth_place")] = city = rng.choice(cities)
        p.facts["birth_place"] = city.name
        p.facts["birth_date"] = _date(rng, born[p.id], born[p.id])
        if born[p.id] < 1945 and rng.random() < 0.7:
            p.facts["death_place"] = rng.choice(cities).name
        if universities and rng.random() < 0.8:
            linked[(p.id, "education")] = uni = rng.choice(universities)
            p.facts["education"] = uni.name
        if rng.random() < 0.6:
            linked[(p.id, "employer")] = co = rng.choice(companies)
            p.facts["employer"] = co.name
        if rng.random() < 0.6:
            p.facts["residence"] = rng.choice(cities).name
        if rng.random() < 0.5:
            teacher = rng.choice(persons)
            if teacher.name != p.name:
                p.facts["teacher"] = teacher.name
        if rng.random() < 0.5:
            kin = [q for q in by_surname[p.surname] if q.name != p.name]
            p.facts["sibling"] = (rng.choice(kin) if kin else rng.choice(persons)).name
            if p.facts["sibling"] == p.name:
                del p.facts["sibling"]
        for rel in ("friend", "patron"):
            other = rng.choice(persons)
            if other.name != p.name and rng.random() < 0.5:
                p.facts[rel] = other.name
        if rng.random() < 0.5:
            child = f"{rng.choice(givens[rng.choice('fm')])} {p.surname}"
            if child != p.name:
                p.facts["child"] = child
        if rng.random() < 0.7:
            p.facts["award"] = rng.choice(awards)
        if "spouse" not in p.facts and rng.random() < 0.5:
            # Spouses often share the surname: another near-duplicate name in the corpus.
            kin = [q for q in by_surname[p.surname] if q.name != p.name and "spouse" not in q.facts]
            other = rng.choice(kin) if kin and rng.random() < 0.5 else rng.choice(persons)
            if other.name != p.name and "spouse" not in other.facts:
                p.facts["spouse"], other.facts["spouse"] = other.name, p.name
        if occupation in _OCCUPATIONS:
            p.ctx["w"], p.ctx["wq"] = _OCCUPATIONS[occupation]
            p.facts["work"] = f"{rng.choice(_ADJ)} {rng.choice(_NOUN)}"
        p.ctx["x"] = rng.choice(_SUBJECTS)
    _prune_shared_facts(entities, rng)
    # Other articles name people in passing, as Wikipedia's lists of natives and alumni do.
    for (pid, rel), target in linked.items():
        if rel in entities[pid].facts:
            target.links.append(entities[pid].name)
    _title_namesakes(entities, born)
    return entities


def _share_names(group: list[Entity], rng: random.Random, share: float, max_size: int) -> None:
    """Give ``share`` of ``group`` the name of another member: namesakes, like Wikipedia's
    many "John Smith"s or "Springfield"s. Called right after the entities are made, so
    every later reference (a mayor, a birthplace) uses the shared name.
    """
    order = list(group)
    rng.shuffle(order)
    n_join = int(share * len(order))
    joiners, anchors = order[:n_join], order[n_join:]
    size = {a.id: 1 for a in anchors}
    for e in joiners:
        open_anchors = [a for a in rng.sample(anchors, min(len(anchors), 8)) if size[a.id] < max_size]
        if not open_anchors:
            continue
        a = open_anchors[0]
        size[a.id] += 1
        e.name, e.surname, e.gender = a.name, a.surname, a.gender
        e.homonym = a.homonym = True
        if e.type != "person":
            # Namesake places and firms are told apart by their country.
            used = {o.ctx["c"] for o in group if o.name == a.name and o is not e}
            if e.ctx["c"] in used:
                e.ctx["c"] = rng.choice(sorted({o.ctx["c"] for o in group} - used) or [e.ctx["c"]])
                e.ctx["c_adj"] = e.ctx["c"] + "n"
                e.ctx["a_c_adj"] = ("an " if e.ctx["c_adj"][0] in "AEIOU" else "a ") + e.ctx["c_adj"]


def _prune_shared_facts(entities: list[Entity], rng: random.Random, keep_shared: float = 0.15) -> None:
    """Within a group of namesakes, a relation is mostly stated for one of them only.

    A question names an entity by its bare name, so it is only asked about a relation that
    exactly one namesake's passages state (see :func:`_domain_questions`); the namesakes'
    other passages are the hardest distractors. Relations several namesakes have are kept
    for one of them, and for the others with probability ``keep_shared``.
    """
    groups: dict[str, list[Entity]] = defaultdict(list)
    for e in entities:
        groups[e.name].append(e)
    for members in groups.values():
        if len(members) < 2:
            continue
        relations = sorted({r for e in members for r in e.facts})
        for rel in relations:
            holders = [e for e in members if rel in e.facts]
            if len(holders) < 2:
                continue
            owner = rng.choice(holders)
            for e in holders:
                if e is not owner and rng.random() >= keep_shared:
                    del e.facts[rel]


def _title_namesakes(entities: list[Entity], born: Mapping[int, int]) -> None:
    """Disambiguated titles, as Wikipedia's: "Name (painter)", "Varnholm (Kestonia)"."""
    groups: dict[str, list[Entity]] = defaultdict(list)
    for e in entities:
        groups[e.name].append(e)
    for members in groups.values():
        if len(members) < 2:
            continue
        titles: set[str] = set()
        for e in members:
            tag = e.ctx["o"] if e.type == "person" else e.ctx["c"]
            title = f"{e.name} ({tag})"
            if title in titles:
                title = (f"{e.name} ({tag}, born {born[e.id]})" if e.type == "person"
                         else f"{e.name} ({tag}, {e.type} {e.id})")
            titles.add(title)
            e.title = title


# --------------------------------------------------------------------------- passages


def _render(template: str, e: Entity, rng: random.Random, value: str, first: bool, others: Sequence[Entity]) -> str:
    """Fill a template for entity ``e``; ``first`` forces the full name as subject."""
    if e.type == "person":
        pr = "he" if e.gender == "m" else "she"
        poss = "his" if e.gender == "m" else "her"
        obj = "him" if e.gender == "m" else "her"
        short = pr.capitalize() if rng.random() < 0.7 else e.surname
    else:
        pr, poss, obj = "it", "its", "it"
        short = {"city": "The city", "river": "The river", "company": "The company", "band": "The group",
                 "university": "The university"}[e.type]
    subject = e.name if first else short
    possessive = f"{e.name}'s" if first else poss.capitalize()
    ctx = dict(e.ctx)
    ctx.setdefault("x", rng.choice(_SUBJECTS))
    ctx.setdefault("o", "")
    ctx.setdefault("w", "work")
    rival = _rival(e, rng, others) if "{R}" in template else ""
    rival2 = _rival(e, rng, others) if "{R2}" in template else ""
    links = rng.sample(e.links, min(2, len(e.links))) + ["", ""]
    out = template.format(
        S=subject, N=e.name, P=possessive, p=poss, pr=pr, o_obj=obj, v=value,
        y=str(rng.randint(*e.years)), R=rival, R2=rival2, L1=links[0], L2=links[1], decade=ctx.get("decade", "1950"),
        **{k: v for k, v in ctx.items() if k not in ("decade",)},
    )
    return out[0].upper() + out[1:]


def _rival(e: Entity, rng: random.Random, others: Sequence[Entity]) -> str:
    """Another entity of the same type, preferably with a name sharing a token with ``e``."""
    same_type = [o for o in rng.sample(others, min(len(others), 60)) if o.type == e.type and o.name != e.name]
    words = set(e.name.split()) - {"The", "of", "University", "River"}
    similar = [o for o in same_type if words & set(o.name.split())]
    pool = similar if similar and rng.random() < 0.8 else same_type
    return rng.choice(pool).name if pool else e.name


def _n_words(sentences: Sequence[str]) -> int:
    return sum(len(s.split()) for s in sentences)


def _count_occurrences(answer: str, text: str) -> int:
    """How often ``answer`` occurs in ``text`` under DPR's token matching."""
    ans, words = tokens(answer), tokens(text)
    n = len(ans)
    return sum(1 for i in range(len(words) - n + 1) if words[i : i + n] == ans) if n else 0


def _chunk(
    e: Entity,
    facts: list[tuple[str, str, str]],
    rng: random.Random,
    first_chunk: bool,
    entities: Sequence[Entity],
    used: set[str] | None = None,
) -> tuple[list[str], list[tuple[str, str, int]]]:
    """Assemble one passage: sentences and (relation, answer, sentence index) of its facts.

    ``facts`` are ``(relation, template, value)``. Filler and passing-mention sentences are
    added until the passage has 80-120 words and 3-7 sentences; facts that do not fit are
    dropped (they simply are not in the corpus).
    """
    parts: list[tuple[str | None, str, str]] = []  # (relation or None, sentence, value)
    if first_chunk:
        parts.append((None, _render(rng.choice(INTRO_TEMPLATES[e.type]), e, rng, "", True, entities), ""))
    for rel, tmpl, value in facts:
        # A continuation passage starts with "He"/"The city", as a 100-word split of a real
        # article does: only its title names the entity.
        parts.append((rel, _render(tmpl, e, rng, value, first_chunk and not parts, entities), value))
    # Drop facts while too long.
    while (_n_words([p[1] for p in parts]) > MAX_WORDS or len(parts) > MAX_SENTENCES) and len(parts) > 2:
        parts.pop()
    fillers = list(FILLERS[e.type])
    rng.shuffle(fillers)
    if used is not None:  # prose the article's earlier passages did not use comes first
        fillers.sort(key=lambda f: f in used)
    mentions = rng.sample(MENTIONS[e.type], min(len(MENTIONS[e.type]), rng.choice((1, 2))))
    extras = mentions[:1] + fillers[:1] + mentions[1:] + fillers[1:]
    if len(e.links) >= 2 and rng.random() < 0.8:
        extras.insert(0, rng.choice(LINK_MENTIONS[e.type]))
    target = rng.randint(MIN_WORDS + 5, MAX_WORDS - 10)
    for tmpl in extras:
        words = _n_words([p[1] for p in parts])
        if words >= target and len(parts) >= MIN_SENTENCES:
            break
        if len(parts) >= MAX_SENTENCES:
            break
        s = _render(tmpl, e, rng, "", first_chunk and not parts, entities)
        if words + len(s.split()) > MAX_WORDS:
            continue
        # Fillers go anywhere but first, so the answer's position in the passage varies.
        pos = rng.randint(1, len(parts)) if parts else 0
        parts.insert(pos, (None, s, ""))
        if used is not None:
            used.add(tmpl)
    sentences = [p[1] for p in parts]
    text = " ".join(sentences)
    kept = []
    for idx, (rel, s, value) in enumerate(parts):
        if rel is not None and _count_occurrences(value, text) == 1 and has_answer([value], s):
            kept.append((rel, value, idx))
    return sentences, kept


def _build_passages(entities: list[Entity], rng: random.Random) -> list[DemoPassage]:
    passages: list[DemoPassage] = []
    for e in entities:
        used: set[str] = set()
        facts = [(rel, rng.choice(PASSAGE_TEMPLATES[(e.type, rel)]), v) for rel, v in e.facts.items()]
        rng.shuffle(facts)
        if e.long and len(facts) >= _LONG_MIN_FACTS:
            # Long articles split into two or three passages; only the first names the entity.
            n_chunks = 3 if len(facts) >= _THREE_PASSAGE_MIN_FACTS else 2
            groups = [facts[i::n_chunks] for i in range(n_chunks)]
        else:
            groups = [facts[: rng.randint(3, 5)]]
        for g, group in enumerate(groups):
            for attempt in range(20):
                # Short templates can leave a passage under 80 words at 7 sentences; fewer
                # facts leave room for the longer filler sentences.
                facts_here = group if attempt < 10 or len(group) < 2 else group[:-1]
                tried = set(used)
                sentences, kept = _chunk(e, facts_here, rng, g == 0, entities, tried)
                n = _n_words(sentences)
                if MIN_WORDS <= n <= MAX_WORDS and MIN_SENTENCES <= len(sentences) <= MAX_SENTENCES:
                    break
            used = tried
            pid = len(passages) + 1
            passages.append(DemoPassage(pid, e.title or e.name, e.id, sentences, [Fact(r, v, i) for r, v, i in kept]))
    return passages


# --------------------------------------------------------------------------- questions


def _poisson(rng: random.Random, mean: float) -> int:
    limit, k, p = math.exp(-mean), 0, 1.0
    while True:
        p *= rng.random()
        if p <= limit:
            return k
        k += 1


def _domain_questions(domain: Domain, data_passages: list[DemoPassage], entities: list[Entity],
                      rng: random.Random) -> list[DemoQuestion]:
    questions: list[DemoQuestion] = []
    # Questions name an entity by its bare name: a relation that several namesakes' passages
    # state would make the question ambiguous, so only relations unique to one are asked.
    stated: dict[tuple[str, str], set[int]] = defaultdict(set)
    for p in data_passages:
        for f in p.facts:
            stated[(entities[p.entity].name, f.relation)].add(p.entity)
    for p in data_passages:
        e = entities[p.entity]
        usable = [f for f in p.facts if (domain.relations is None or f.relation in domain.relations)
                  and len(stated[(e.name, f.relation)]) == 1]
        k = min(len(usable), _poisson(rng, domain.rate))
        for f in rng.sample(usable, k):
            templates = QUESTION_TEMPLATES[f.relation][domain.style]
            q = rng.choice(templates).format(N=e.question_name, wq=e.ctx.get("wq", "work"))
            q = q[0].upper() + q[1:] if domain.style != "chat" else q
            # A question that contains its own answer (the "University of X" is in X) is useless.
            if has_answer([f.answer], q):
                continue
            questions.append(DemoQuestion(q, (f.answer,), p.id, f.sentence, e.id, f.relation))
    return questions


def _split_by_entity(questions: list[DemoQuestion], rng: random.Random, dev_fraction: float,
                     test_fraction: float, train_size: int | None) -> dict[str, list[DemoQuestion]]:
    """Split so that no dev/test entity has a training question (whole entities move)."""
    by_entity: dict[int, list[DemoQuestion]] = defaultdict(list)
    for q in questions:
        by_entity[q.entity].append(q)
    order = sorted(by_entity)
    rng.shuffle(order)
    want = {"test": round(test_fraction * len(questions)), "dev": round(dev_fraction * len(questions))}
    out: dict[str, list[DemoQuestion]] = {"train": [], "dev": [], "test": []}
    for ent in order:
        split = next((s for s in ("test", "dev") if len(out[s]) < want[s]), "train")
        out[split].extend(by_entity[ent])
    if train_size is not None and train_size < len(out["train"]):
        out["train"] = sorted(rng.sample(out["train"], train_size), key=lambda q: (q.passage_id, q.sentence))
    for split in out:
        rng.shuffle(out[split])
    return out


def _random_negatives(q: DemoQuestion, passages: list[DemoPassage], rng: random.Random) -> list[int]:
    """DPR-style random negatives: passages that do not contain an answer."""
    out: list[int] = []
    while len(out) < N_RANDOM_NEGATIVES:
        p = rng.choice(passages)
        if p.id != q.passage_id and p.id not in out and not has_answer(list(q.answers), p.text):
            out.append(p.id)
    return out


# --------------------------------------------------------------------------- public API


def _check_args(n_entities: int, domains: Sequence[str], dev_fraction: float, test_fraction: float,
                train_per_domain: int | None) -> None:
    if n_entities < 20:
        raise InputError("n_entities", f"must be at least 20, got {n_entities}")
    if not domains:
        raise InputError("domains", "give at least one domain")
    unknown = [d for d in domains if d not in DOMAINS]
    if unknown:
        raise InputError("domains", f"unknown domain(s) {unknown}; known: {sorted(DOMAINS)}")
    if len(set(domains)) != len(domains):
        raise InputError("domains", f"duplicate domain names in {list(domains)}")
    for name, f in (("dev_fraction", dev_fraction), ("test_fraction", test_fraction)):
        if not 0 <= f < 1:
            raise InputError(name, f"must be in [0, 1), got {f}")
    if dev_fraction + test_fraction >= 0.9:
        raise InputError("dev_fraction + test_fraction", f"leave room for training data, got {dev_fraction + test_fraction}")
    if train_per_domain is not None and train_per_domain < 1:
        raise InputError("train_per_domain", f"must be positive or None, got {train_per_domain}")


def build_demo(
    seed: int = 13,
    n_entities: int = 1300,
    domains: Sequence[str] = ("encyclopedia",),
    train_per_domain: int | None = None,
    dev_fraction: float = 0.08,
    test_fraction: float = 0.22,
    random_negatives: bool = True,
) -> DemoData:
    """Generate the dataset in memory (see :func:`generate_demo` for the arguments).
    ``random_negatives=False`` leaves ``negatives`` empty, for callers that pick their own."""
    domains = tuple(domains)
    _check_args(n_entities, domains, dev_fraction, test_fraction, train_per_domain)
    entities = _build_world(random.Random(f"dcsr-demo:{seed}:world"), n_entities)
    passages = _build_passages(entities, random.Random(f"dcsr-demo:{seed}:passages"))
    questions: dict[str, dict[str, list[DemoQuestion]]] = {}
    negatives: dict[tuple[str, str, int], list[int]] = {}
    for name in domains:
        # Seeded per domain name, so a domain's questions do not depend on which others are asked for.
        rng = random.Random(f"dcsr-demo:{seed}:domain:{name}")
        qs = _domain_questions(DOMAINS[name], passages, entities, rng)
        questions[name] = _split_by_entity(qs, rng, dev_fraction, test_fraction, train_per_domain)
        for split in ("train", "dev") if random_negatives else ():
            for i, q in enumerate(questions[name][split]):
                negatives[(name, split, i)] = _random_negatives(q, passages, rng)
    return DemoData(passages, entities, questions, negatives)


def questions_per_passage_histogram(questions: Sequence[DemoQuestion]) -> dict[str, int]:
    """How many passages are gold for 1, 2, 3 and >=4 of ``questions``."""
    per_passage = Counter(q.passage_id for q in questions)
    hist = {"1": 0, "2": 0, "3": 0, ">=4": 0}
    for n in per_passage.values():
        hist[str(n) if n < 4 else ">=4"] += 1
    return hist


def _ctx(p: DemoPassage, **extra) -> dict:
    return {"title": p.title, "text": p.text, **extra, "passage_id": str(p.id)}


def _biencoder_records(data: DemoData, domain: str, split: str):
    for i, q in enumerate(data.questions[domain][split]):
        gold = data.passage(q.passage_id)
        yield {
            "dataset": f"demo_{domain}_{split}",
            "question": q.question,
            "answers": list(q.answers),
            "positive_ctxs": [_ctx(gold, score=1000, title_score=1)],
            "negative_ctxs": [_ctx(data.passage(pid), score=0, title_score=0)
                              for pid in data.negatives[(domain, split, i)]],
            "hard_negative_ctxs": [],
        }


def summarize(data: DemoData) -> dict:
    """Counts of passages, entities and questions per split and domain."""
    summary: dict = {
        "passages": len(data.passages),
        "entities": len(data.entities),
        "multi_passage_entities": sum(1 for c in Counter(p.entity for p in data.passages).values() if c > 1),
        "domains": {},
    }
    for name, splits in data.questions.items():
        summary["domains"][name] = {
            **{split: len(qs) for split, qs in splits.items()},
            "questions_per_passage": questions_per_passage_histogram([q for qs in splits.values() for q in qs]),
            "train_questions_per_passage": questions_per_passage_histogram(splits["train"]),
        }
    return summary


SPLIT_EXT = {"train": "json", "dev": "json", "test": "qa.csv"}


def write_demo(data: "DemoData", corpus_out: str | Path | None = None,
               dataset_outs: Mapping[str, Mapping[str, str | Path]] | None = None,
               log: Callable[[str], None] | None = None) -> None:
    """Write any subset of the demo files: the corpus to ``corpus_out`` and, for each domain
    in ``dataset_outs``, its ``train``/``dev`` biencoder JSON and ``test`` qas TSV to the
    given paths. The world is deterministic from the seed, so separate jobs can each write
    their own files from their own ``build_demo`` call and still agree."""
    log = log or (lambda msg: print(msg, file=sys.stderr))
    if corpus_out is not None:
        n = write_corpus(corpus_out, (Passage(p.id, p.text, p.title) for p in data.passages))
        log(f"wrote {n} passages to {corpus_out}")
    for name, paths in (dataset_outs or {}).items():
        if name not in data.questions:
            raise InputError("demo generator", f"domain {name!r} was not generated (have {', '.join(data.questions)})")
        for split in ("train", "dev"):
            n = write_biencoder(paths[split], _biencoder_records(data, name, split))
            log(f"wrote {n} {split} questions to {paths[split]}")
        n = write_qas(paths["test"], (QA(q.question, list(q.answers)) for q in data.questions[name]["test"]))
        log(f"wrote {n} test questions to {paths['test']}")


def generate_demo(
    out_dir: str | Path,
    seed: int = 13,
    n_entities: int = 1300,
    domains: Sequence[str] = ("encyclopedia",),
    train_per_domain: int | None = None,
    dev_fraction: float = 0.08,
    test_fraction: float = 0.22,
    log: Callable[[str], None] | None = None,
) -> dict:
    """Write the demo dataset to ``out_dir`` and return its summary.

    Files: ``psgs_w100.tsv`` (the shared corpus) and, per domain ``D``, ``D-train.json`` and
    ``D-dev.json`` (DPR biencoder JSON, two random negatives, no hard negatives yet) and
    ``D-test.qa.csv`` (DPR qas TSV). Questions are split by entity: ``test_fraction`` and
    ``dev_fraction`` of a domain's questions go to test and dev (whole entities at a time), the
    rest to train, capped at ``train_per_domain`` when given. The defaults give about 2,600
    passages and 1,900 / 200 / 550 questions for one domain (600 entities: about 1,150
    passages and 800 / 90 / 250 questions).
    """
    data = build_demo(seed, n_entities, domains, train_per_domain, dev_fraction, test_fraction)
    out = Path(out_dir)
    files = {name: {split: out / f"{name}-{split}.{ext}" for split, ext in SPLIT_EXT.items()} for name in data.questions}
    write_demo(data, corpus_out=out / CORPUS_FILE, dataset_outs=files, log=log)
    return summarize(data)
