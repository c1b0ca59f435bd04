"""A built-in French->English generator: real grammar, no files, deterministic by seed.

The translation is a function of the French sentence (no random synonyms), so a small model can
learn it completely; what it must learn is where words go and how they agree, which is what
positional information is for:

- gender/number agreement of determiners, adjectives and verbs (``les petites voitures rouges``
  -> ``the small red cars``; ``nous regardons`` -> ``we watch``, ``il regarde`` -> ``he watches``);
- adjectives after the French noun move before the English one (``une voiture rouge`` -> ``a red
  car``), a few stay before (petit, grand, jeune, joli, bon, mauvais);
- ``ne ... pas`` negation -> ``do/does not`` (``il ne regarde pas le chien``);
- clitic object pronouns before the French verb (``je la regarde`` -> ``I watch her``);
- ``de`` possessives reordered (``le chat de la femme`` -> ``the woman's cat``; du/des contractions);
- relative clauses with ``qui`` (subject) and ``que`` (object): ``le garçon qui mange une pomme``,
  ``la pomme que le garçon mange``;
- prepositional phrases and coordination with ``et``/``mais`` steer the length;
- elision and contraction (j', l', n', qu', m', t', du, des, cet, mon before a vowel; English a/an).

Words are whitespace-separated tokens; the final period is attached to the last word, elided
forms (``j'aime``) count as one word. Each sentence's French word count lies in the requested
range.
"""
from __future__ import annotations

import random
from dataclasses import dataclass

from utils.errors import DataError

# ------------------------------------------------------------------------------------ lexicon


@dataclass(frozen=True)
class Noun:
    fr: str
    fr_pl: str
    fem: bool
    en: str
    en_pl: str
    animate: bool


def _nouns(spec: str, animate: bool) -> list[Noun]:
    """Lines "fr[/fr_pl] m|f en[/en_pl]"; default plurals add -s."""
    out = []
    for line in spec.strip().splitlines():
        fr, gender, en = line.split()
        fr_sg, _, fr_pl = fr.partition("/")
        en_sg, _, en_pl = en.partition("/")
        out.append(Noun(fr_sg, fr_pl or fr_sg + "s", gender == "f", en_sg, en_pl or en_sg + "s", animate))
    return out


PEOPLE = _nouns("""
homme m man/men
femme f woman/women
garçon m boy
fille f girl
enfant m child/children
ami m friend
amie f friend
voisin m neighbour
voisine f neighbour
professeur m teacher
étudiant m student
étudiante f student
médecin m doctor
boulanger m baker
boulangère f baker
chanteur m singer
chanteuse f singer
roi m king
reine f queen
frère m brother
sœur f sister
oncle m uncle
tante f aunt
cousin m cousin
cousine f cousin
policier m policeman/policemen
facteur m postman/postmen
artiste m artist
acteur m actor
actrice f actress/actresses
""", True)

ANIMALS = _nouns("""
chat m cat
chatte f cat
chien m dog
chienne f dog
oiseau/oiseaux m bird
cheval/chevaux m horse
vache f cow
souris/souris f mouse/mice
lapin m rabbit
poule f hen
canard m duck
loup m wolf/wolves
renard m fox/foxes
ours/ours m bear
tigre m tiger
lion m lion
singe m monkey
poisson m fish/fish
serpent m snake
mouton m sheep/sheep
""", True)

THINGS = _nouns("""
pomme f apple
orange f orange
gâteau/gâteaux m cake
pain m bread/breads
fromage m cheese
livre m book
lettre f letter
journal/journaux m newspaper
voiture f car
vélo m bike
train m train
bateau/bateaux m boat
maison f house
table f table
chaise f chair
lampe f lamp
porte f door
fenêtre f window
tasse f cup
bouteille f bottle
chapeau/chapeaux m hat
robe f dress/dresses
chemise f shirt
chaussure f shoe
clé f key
photo f photo
carte f map
lit m bed
fleur f flower
arbre m tree
ballon m ball
jouet m toy
sac m bag
stylo m pen
verre m glass/glasses
assiette f plate
montre f watch/watches
horloge f clock
guitare f guitar
piano m piano
tableau/tableaux m painting
image f picture
boîte f box/boxes
couteau/couteaux m knife/knives
cuillère f spoon
fourchette f fork
bougie f candle
téléphone m phone
ordinateur m computer
parapluie m umbrella
""", False)

PLACES = _nouns("""
jardin m garden
parc m park
cuisine f kitchen
rue f street
forêt f forest
école f school
église f church/churches
magasin m shop
gare f station
plage f beach/beaches
ville f town
village m village
rivière f river
montagne f mountain
chambre f bedroom
bureau/bureaux m office
marché m market
musée m museum
hôpital/hôpitaux m hospital
bibliothèque f library/libraries
""", False)

SUBJECTS = PEOPLE + ANIMALS
OBJECTS = PEOPLE + ANIMALS + THINGS

# (masc sg, fem sg, masc pl, fem pl) / English; a bare masculine form inflects regularly.
_POST_ADJ = """
rouge en red
bleu en blue
vert en green
noir en black
blanc,blanche,blancs,blanches en white
gris,grise,gris,grises en grey
jaune en yellow
brun en brown
rose en pink
violet,violette,violets,violettes en purple
orange,orange,orange,orange en orange
chaud en warm
froid en cold
rapide en fast
lent en slow
lourd en heavy
léger,légère,légers,légères en light
propre en clean
sale en dirty
content en happy
triste en sad
fatigué en tired
malade en sick
riche en rich
pauvre en poor
gentil,gentille,gentils,gentilles en kind
méchant en mean
drôle en funny
timide en shy
fort en strong
célèbre en famous
calme en quiet
bruyant en noisy
moderne en modern
ancien,ancienne,anciens,anciennes en ancient
étrange en strange
cassé en broken
vide en empty
plein en full
rond en round
carré en square
"""
_PRE_ADJ = """
petit en small
grand en big
jeune en young
joli en pretty
bon,bonne,bons,bonnes en good
mauvais,mauvaise,mauvais,mauvaises en bad
"""


@dataclass(frozen=True)
class Adjective:
    forms: tuple[str, str, str, str]  # masc sg, fem sg, masc pl, fem pl
    en: str

    def agree(self, fem: bool, plural: bool) -> str:
        return self.forms[2 * plural + fem]


def _adjectives(spec: str) -> list[Adjective]:
    out = []
    for line in spec.strip().splitlines():
        fr, _, en = line.split()
        if "," in fr:
            forms = tuple(fr.split(","))
        else:
            fem = fr if fr.endswith("e") else fr + "e"
            forms = (fr, fem, fr if fr.endswith("s") else fr + "s", fem + "s")
        out.append(Adjective(forms, en))
    return out


POST_ADJECTIVES = _adjectives(_POST_ADJ)
PRE_ADJECTIVES = _adjectives(_PRE_ADJ)


@dataclass(frozen=True)
class Verb:
    fr: str  # infinitive of a regular -er verb
    en: str  # English base form
    en_3sg: str

    def conjugate(self, person: int) -> str:
        """person 0-5: je, tu, il/elle, nous, vous, ils/elles."""
        stem = self.fr[:-2]
        ending = ("e", "es", "e", "ons", "ez", "ent")[person]
        if person == 3 and stem.endswith("g"):
            stem += "e"  # nous mangeons
        return stem + ending


def _verbs(spec: str) -> list[Verb]:
    out = []
    for line in spec.strip().splitlines():
        fr, en, en3 = line.split()
        out.append(Verb(fr, en, en3))
    return out


TRANSITIVE = _verbs("""
regarder watch watches
aimer love loves
adorer adore adores
détester hate hates
chercher seek seeks
trouver find finds
porter carry carries
donner give gives
montrer show shows
garder keep keeps
laver wash washes
manger eat eats
fermer close closes
préparer prepare prepares
dessiner draw draws
écouter hear hears
apporter bring brings
oublier forget forgets
quitter leave leaves
visiter visit visits
toucher touch touches
cacher hide hides
attraper catch catches
tirer pull pulls
pousser push pushes
casser break breaks
réparer fix fixes
emprunter borrow borrows
ranger tidy tidies
observer observe observes
""")

INTRANSITIVE = _verbs("""
danser dance dances
chanter sing sings
marcher walk walks
travailler work works
nager swim swims
tomber fall falls
rêver dream dreams
pleurer cry cries
crier shout shouts
sauter jump jumps
jouer play plays
voyager travel travels
""")

PRONOUNS = [("je", "I"), ("tu", "you"), ("il", "he"), ("elle", "she"),
            ("nous", "we"), ("vous", "you"), ("ils", "they"), ("elles", "they")]
PERSON = {"je": 0, "tu": 1, "il": 2, "elle": 2, "nous": 3, "vous": 4, "ils": 5, "elles": 5}
OBJECT_PRONOUNS = [("le", "him"), ("la", "her"), ("les", "them"), ("me", "me"), ("te", "you"),
                   ("nous", "us"), ("vous", "you")]
# (French form by (fem, plural), English) for determiners of a head noun.
DETERMINERS = {
    "def": (("le", "la", "les", "les"), ("the", "the")),
    "indef": (("un", "une", "des", "des"), ("a", "some")),
    "dem": (("ce", "cette", "ces", "ces"), ("this", "these")),
    "my": (("mon", "ma", "mes", "mes"), ("my", "my")),
    "our": (("notre", "notre", "nos", "nos"), ("our", "our")),
    "their": (("leur", "leur", "leurs", "leurs"), ("their", "their")),
}
NUMBERS = [("deux", "two"), ("trois", "three"), ("quatre", "four"), ("cinq", "five")]
PREPOSITIONS = [("dans", "in"), ("sur", "on"), ("sous", "under"), ("avec", "with"), ("sans", "without"),
                ("derrière", "behind"), ("pour", "for"), ("près de", "near"), ("loin de", "far from")]

REFLEXIVE = {"je": "me", "tu": "te", "nous": "nous", "vous": "vous"}
VOWELS = set("aeiouyéèêàâîôûh")


def french_vocabulary() -> set[str]:
    """Every French word form the grammar can produce (before elision)."""
    words = {w for n in PEOPLE + ANIMALS + THINGS + PLACES for w in (n.fr, n.fr_pl)}
    words |= {f for a in POST_ADJECTIVES + PRE_ADJECTIVES for f in a.forms}
    words |= {v.conjugate(p) for v in TRANSITIVE + INTRANSITIVE for p in range(6)}
    words |= {p for p, _ in PRONOUNS + OBJECT_PRONOUNS} | {w for d in DETERMINERS.values() for w in d[0]}
    words |= {n for n, _ in NUMBERS} | {w for p, _ in PREPOSITIONS for w in p.split()}
    return words | {"ne", "pas", "qui", "que", "et", "mais", "de", "du"}


VOCABULARY_SIZE = len(french_vocabulary())

# ------------------------------------------------------------------------------------ phrases

Phrase = tuple[list[str], list[str]]  # (French words, English words)


@dataclass
class NounPhrase:
    fr: list[str]
    en: list[str]
    plural: bool
    fem: bool


def noun_phrase(noun: Noun, plural: bool, det: str = "def", pre: Adjective | None = None,
                post: Adjective | None = None, number: tuple[str, str] | None = None) -> NounPhrase:
    """Determiner (or number) + [pre-adjective] + noun + [post-adjective], agreeing in both languages."""
    fr_det, en_det = DETERMINERS[det]
    if number:
        plural = True
        fr = [number[0]]
        en = [number[1]]
    else:
        fr = [fr_det[2 * plural + noun.fem]]
        en = [en_det[plural]]
    if pre:
        fr.append(pre.agree(noun.fem, plural))
    fr.append(noun.fr_pl if plural else noun.fr)
    if post:
        fr.append(post.agree(noun.fem, plural))
    en += [a.en for a in (pre, post) if a] + [noun.en_pl if plural else noun.en]
    return NounPhrase(fr, en, plural, noun.fem)


def possessive(head: NounPhrase, owner: NounPhrase) -> NounPhrase:
    """``le chat de la femme`` -> ``the woman's cat`` (head must have a definite determiner)."""
    owner_en = owner.en[:-1] + [owner.en[-1] + ("'" if owner.en[-1].endswith("s") else "'s")]
    return NounPhrase(head.fr + ["de"] + owner.fr, owner_en + head.en[1:], head.plural, head.fem)


def verb_form(verb: Verb, person: int) -> str:
    return verb.en_3sg if person == 2 else verb.en


def negated(person: int) -> list[str]:
    return ["does", "not"] if person == 2 else ["do", "not"]


def relative_qui(head: NounPhrase, verb: Verb, obj: NounPhrase | None, animate: bool) -> NounPhrase:
    """``le garçon qui mange une pomme`` -> ``the boy who eats an apple``."""
    person = 5 if head.plural else 2
    fr = head.fr + ["qui", verb.conjugate(person)] + (obj.fr if obj else [])
    en = head.en + ["who" if animate else "that", verb_form(verb, person)] + (obj.en if obj else [])
    return NounPhrase(fr, en, head.plural, head.fem)


def relative_que(head: NounPhrase, subject: NounPhrase, verb: Verb) -> NounPhrase:
    """``la pomme que le garçon mange`` -> ``the apple that the boy eats``."""
    person = 5 if subject.plural else 2
    fr = head.fr + ["que"] + subject.fr + [verb.conjugate(person)]
    en = head.en + ["that"] + subject.en + [verb_form(verb, person)]
    return NounPhrase(fr, en, head.plural, head.fem)


def clause(subject: NounPhrase | tuple[str, str], verb: Verb, obj: NounPhrase | None = None,
           negative: bool = False, clitic: tuple[str, str] | None = None,
           pp: tuple[tuple[str, str], NounPhrase] | None = None) -> Phrase:
    """Subject + verb [+ object NP | clitic pronoun before the verb] [+ prepositional phrase].

    ``subject`` is a NounPhrase or a subject pronoun pair such as ("je", "I").
    """
    if isinstance(subject, NounPhrase):
        person = 5 if subject.plural else 2
        fr, en = list(subject.fr), list(subject.en)
    else:
        person = PERSON[subject[0]]
        fr, en = [subject[0]], [subject[1]]
    if negative:
        fr.append("ne")
        en += negated(person) + [verb.en]
    else:
        en.append(verb_form(verb, person))
    if clitic:
        fr.append(clitic[0])
    fr.append(verb.conjugate(person))
    if negative:
        fr.append("pas")
    if clitic:
        en.append(clitic[1])
    elif obj:
        fr += obj.fr
        en += obj.en
    if pp:
        (fr_prep, en_prep), place = pp
        fr += fr_prep.split() + place.fr
        en += en_prep.split() + place.en
    return fr, en


# ------------------------------------------------------------------------------------ surface

def elide_french(words: list[str]) -> list[str]:
    """French elision (j', l', n', qu', m', t', d' before a vowel; cet, mon), then the
    contractions de + le -> du, de + les -> des."""
    elided: list[str] = []
    for w in words:
        if elided and w[0] in VOWELS:
            prev = elided[-1]
            if prev in ("je", "le", "la", "ne", "que", "me", "te", "de"):
                elided[-1] = prev[0] + ("u" if prev == "que" else "") + "'" + w
                continue
            if prev == "ce":
                elided[-1] = "cet"
            elif prev == "ma":
                elided[-1] = "mon"
        elided.append(w)
    out: list[str] = []
    for w in elided:
        if out and out[-1] == "de" and w in ("le", "les"):
            out[-1] = "du" if w == "le" else "des"
        else:
            out.append(w)
    return out


def fix_english(words: list[str]) -> list[str]:
    """a -> an before a vowel sound."""
    return ["an" if w == "a" and i + 1 < len(words) and words[i + 1][0] in "aeiou" else w
            for i, w in enumerate(words)]


def sentence(fr: list[str], en: list[str]) -> tuple[str, str]:
    fr_words, en_words = elide_french(fr), fix_english(en)
    fr_text = " ".join(fr_words) + "."
    en_text = " ".join(en_words) + "."
    return fr_text[0].upper() + fr_text[1:], en_text[0].upper() + en_text[1:]


# ------------------------------------------------------------------------------------ sampling

class _Sampler:
    """Random sentences under a word budget (the budget is a target, checked afterwards)."""

    def __init__(self, rng: random.Random):
        self.r = rng

    def np(self, pool: list[Noun], budget: int, definite_only: bool = False, allow_indef: bool = True,
           modifiers: bool = True) -> NounPhrase:
        r = self.r
        noun = r.choice(pool)
        plural = r.random() < 0.35
        number = None
        if definite_only:
            det = "def"
        else:
            det = r.choice(["def", "def", "indef", "dem", "my", "our", "their"] if allow_indef
                           else ["def", "def", "dem", "my", "our", "their"])
            if allow_indef and r.random() < 0.08:
                number = r.choice(NUMBERS)
        pre = r.choice(PRE_ADJECTIVES) if modifiers and budget >= 3 and r.random() < 0.3 else None
        post = r.choice(POST_ADJECTIVES) if modifiers and budget >= 3 and r.random() < 0.5 else None
        return noun_phrase(noun, plural, det, pre, post, number)

    def subject_np(self, budget: int) -> NounPhrase:
        r = self.r
        head = self.np(SUBJECTS, budget)
        extra = budget - len(head.fr)
        if extra >= 4 and r.random() < 0.35 and head.fr[0] in ("le", "la", "les"):
            return possessive(head, self.np(PEOPLE, 2, modifiers=False, allow_indef=False))
        if extra >= 4 and r.random() < 0.4:
            verb = self.r.choice(TRANSITIVE)
            return relative_qui(head, verb, self.np(OBJECTS, 2, modifiers=False), head_animate(head))
        return head

    def object_np(self, budget: int, negative: bool) -> NounPhrase:
        r = self.r
        head = self.np(OBJECTS, budget, allow_indef=not negative)
        extra = budget - len(head.fr)
        if extra >= 4 and r.random() < 0.3 and head.fr[0] in ("le", "la", "les"):
            return possessive(head, self.np(PEOPLE, 2, modifiers=False, allow_indef=False))
        if extra >= 4 and r.random() < 0.35:
            return relative_que(head, self.np(SUBJECTS, 2, modifiers=False), r.choice(TRANSITIVE))
        return head

    def clause(self, budget: int) -> Phrase:
        r = self.r
        negative = r.random() < 0.25
        if budget <= 3 or r.random() < 0.3:
            subject: NounPhrase | tuple[str, str] = r.choice(PRONOUNS)
        else:
            subject = self.subject_np(max(2, budget // 2))
        used = 1 if isinstance(subject, tuple) else len(subject.fr)
        left = budget - used - 1 - 2 * negative
        intransitive = left <= 1 or r.random() < 0.15
        verb = r.choice(INTRANSITIVE if intransitive else TRANSITIVE)
        obj = clitic = None
        if not intransitive:
            if r.random() < 0.25:
                clitic = r.choice(OBJECT_PRONOUNS)
                if clitic[0] in ("le", "la") and verb.fr[0] in VOWELS:
                    clitic = ("les", "them")  # l' would hide the gender
                if isinstance(subject, tuple) and REFLEXIVE.get(subject[0]) == clitic[0]:
                    clitic = ("les", "them")  # je me / nous nous would be reflexive
                left -= 1
            else:
                obj = self.object_np(max(2, left - (3 if left > 6 else 0)), negative)
                left -= len(obj.fr)
        pp = None
        if left >= 3 and r.random() < 0.6:
            pp = (r.choice(PREPOSITIONS), self.np(PLACES + THINGS, 3, allow_indef=False))
        return clause(subject, verb, obj, negative, clitic, pp)

    def pair(self, target: int) -> tuple[list[str], list[str]]:
        fr, en = self.clause(target)
        while len(fr) < target - 3:
            conj = self.r.choice([("et", "and"), ("et", "and"), ("mais", "but")])
            more_fr, more_en = self.clause(target - len(fr) - 1)
            fr, en = fr + [conj[0]] + more_fr, en + [conj[1]] + more_en
        return fr, en


def head_animate(np: NounPhrase) -> bool:
    """Whether a noun phrase's head noun is a person or an animal."""
    return any(w in _ANIMATE_FORMS for w in np.fr)


_ANIMATE_FORMS = {f for n in SUBJECTS for f in (n.fr, n.fr_pl)}

SHORTEST = 2  # "Je danse."


def generate_pairs(n: int, min_words: int, max_words: int, seed: int) -> tuple[list[str], list[str]]:
    """n (French, English) sentence pairs whose French side has min_words..max_words words
    (whitespace tokens, final period attached), deterministic for (n, min_words, max_words, seed)."""
    if n < 0:
        raise DataError(f"synthetic split size must be >= 0, got {n}")
    if min_words > max_words:
        raise DataError(f"synthetic split has min_words {min_words} > max_words {max_words}")
    if min_words < SHORTEST:
        raise DataError(f"synthetic sentences have at least {SHORTEST} words; min_words {min_words} is too small")
    rng = random.Random(seed)
    sampler = _Sampler(rng)
    src: list[str] = []
    tgt: list[str] = []
    while len(src) < n:
        target = rng.randint(min_words, max_words)
        fr, en = sampler.pair(target)
        fr_text, en_text = sentence(fr, en)
        if min_words <= len(fr_text.split()) <= max_words:
            src.append(fr_text)
            tgt.append(en_text)
    return src, tgt
