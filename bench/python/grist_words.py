"""grist's word splitting (clean/internal/word_split.cc) in Python, to classify the disagreements of
clean_agreement.py: if datatrove's filter reaches grist's verdict when it splits words this way, the
disagreement comes from word splitting (grist's approximation of spaCy's tokenizer)."""
import unicodedata
PUNCT = set("… , : ; ! ? ¿ ؟ ¡ ( ) [ ] { } < > _ # * & 。 ？ ！ ， 、 ； ： ～ · । ، ۔ ؛ ٪".split())
QUOTES = set("' \" ” “ ` ‘ ´ ’ ‚ , „ » « 「 」 『 』 （ ） 〔 〕 【 】 《 》 〈 〉 ⟦ ⟧".split())
CURRENCY = set("$ £ € ¥ ฿ ₽ ﷼ ₴ ₠ ₡ ₢ ₣ ₤ ₥ ₦ ₧ ₨ ₩ ₪ ₫ ₭ ₮ ₯ ₰ ₱ ₲ ₳ ₵ ₶ ₷ ₸ ₹ ₺ ₻ ₼ ₾ ₿".split())
UNITS = sorted(set("km km² km³ m m² m³ dm dm² dm³ cm cm² cm³ mm mm² mm³ ha µm nm yd in ft kg g mg µg t lb oz m/s km/h kmh mph hPa Pa mbar mb MB kb KB gb GB tb TB T G M K %".split()), key=len, reverse=True)
HYPHENS = set("- – — ~".split())
ABBREV = set("""Adm. Ak. Ala. Apr. Ariz. Ark. Aug. Bros. Calif. Co. Colo. Conn. Corp. D.C. Dec. Del. Dr. E.G. E.g. Feb. Fla. Ga. Gen. Gov. I.E. I.e. Ia. Id. Ill. Inc. Ind. Jan. Jr. Jul. Jun. Kan. Kans. Ky. La. Ltd. Mar. Mass. Md. Messrs. Mich. Minn. Miss. Mo. Mont. Mr. Mrs. Ms. Mt. N.C. N.D. N.H. N.J. N.M. N.Y. Neb. Nebr. Nev. Nov. Oct. Okla. Ore. Pa. Ph.D. Prof. Rep. Rev. S.C. Sen. Sep. Sept. St. Tenn. Va. Wash. Wis. a.m. co. e.g. i.e. p.m. v.s. vs.""".split())
ABBREV |= set("and/or w/o C++ '' o'clock ma'am 'em 's 'S 'd 'll 're 'm 'cause ’s ’S ’’".split())
ABBREV |= set(""":) :-) :)) ;) ;-) :( :-( :(( =) =( :D :-D ;D :P :-P :p :-p ): (: )-: (-: :] :-] [: :/ :-/ =/ <3 </3 :'( :') :o :O :-o :-O xD XD :| :-| ^_^ o.O O.o o_O O_o -_- (= =] =[ =| :3 :> :x :X :* :-* 8) 8-) <.< >.> >.< ._. ;_; @_@ 0.0 o.o O.O :0 :1 :-0 :} :-} =D =3 (; (^_^) v.v V.V""".split())
NT = {"do","does","did","is","are","was","were","have","has","had","could","would","should","might","must","need","dare","ought","may","sha","ca","wo","ai"}
PRON = {"i","you","he","she","it","we","they","there","that","this","these","those","what","who","where","when","why","how"}
RE_PRON = {"you","we","they","there","these","those","what","who","where","when","why","how"}
S_PRON = {"he","she","it","that","there","this","what","who","where","when","why","how"}
EXCLUDED = {"hell","shell","shed","ill","its","well","were","whore"}
def isicon(c): return ord(c) >= 0xA6 and unicodedata.category(c) == "So"
def isalpha(c): return c.isalpha()
def uncased(c): return ord(c) >= 0x80 and unicodedata.category(c) in ("Lo", "Lm", "Mn", "Mc")
def is_lower(c): return c.islower() if ord(c) < 0x80 else (unicodedata.category(c) == "Ll" or uncased(c))
def is_upper(c): return c.isupper() if ord(c) < 0x80 else (unicodedata.category(c) in ("Lu", "Lt") or uncased(c))
def prefix_len(s):
    c = s[0]
    if s.startswith("US$") or s.startswith("C$") or s.startswith("A$"): return 3 if s[0]=="U" else 2
    if s.startswith(".."):
        n = 2
        while n < len(s) and s[n] == ".": n += 1
        return n
    if c in "§%=—–" or c in PUNCT or c in QUOTES or c in CURRENCY or isicon(c): return 1
    if c == "+" and not (len(s) > 1 and s[1].isdigit()): return 1
    return 0
def suffix_len(s):
    c = s[-1]
    if s.endswith(".."):
        n = 2
        while n < len(s) and s[-n-1] == ".": n += 1
        return n
    if c in PUNCT or c in QUOTES or isicon(c) or c in "—–": return 1
    for t in ("'s","'S","’s","’S"):
        if s.endswith(t) : return 2
    if len(s) >= 2:
        p = s[-2]
        if c == "+" and p.isdigit(): return 1
        if c in CURRENCY and p.isdigit(): return 1
        if c == ".":
            if (p.isdigit() and p.isascii()) or is_lower(p) or p in "%²-+" or p in PUNCT or p in QUOTES: return 1
            if len(s) >= 3 and is_upper(p) and is_upper(s[-3]): return 1
            if len(s) >= 3 and p in "FfCcKk" and s[-3] == "°": return 1
    for u in UNITS:
        if len(s) > len(u) and s.endswith(u) and s[-len(u)-1].isdigit(): return len(u)
    return 0
def special(s):
    if s in ABBREV: return [s]
    if len(s) == 2 and s[1] == "." and s[0].islower() and ord(s[0]) < 0x100: return [s]
    if len(s) > 12 or any(ord(c) >= 0x80 and c != "’" for c in s): return None
    if any("A" <= c <= "Z" for c in s[1:]): return None
    k = s.replace("’", "'").lower()
    for suf in ("n't", "nt"):
        if len(k) > len(suf) and k.endswith(suf) and k[:-len(suf)] in NT:
            n = len(k) - len(suf); return [s[:n], s[n:]]
    for suf in ("'ll","'re","'ve","'d","'m","'s","ll","re","ve","d","m","s"):
        if len(k) <= len(suf) or not k.endswith(suf): continue
        base = k[:-len(suf)]
        if base not in PRON: continue
        bare = suf.lstrip("'")
        ok = {"m": base == "i", "re": base in RE_PRON, "ve": base == "i" or base in RE_PRON,
              "s": base in S_PRON}.get(bare, True)
        if not ok: continue
        if not suf.startswith("'") and k in EXCLUDED: continue
        n = len(base); return [s[:n], s[n:]]
    if k == "cannot" or k in ("gonna", "gotta"): return [s[:3], s[3:]]
    if k == "yall": return [s[:1], s[1:]]
    if k == "y'all": return [s[:2], s[2:]]
    d = 0
    while d < len(k) and k[d].isdigit() and ord(k[d]) < 0x80: d += 1
    if d in (1, 2) and 1 <= int(k[:d]) <= 12 and k[d:] in ("am", "pm", "a.m.", "p.m."):
        return [s[:d], s[d:]]
    return None
def _host_char(c): return c.isdigit() or c.isalpha() or ord(c) >= 0xA1
def is_url(s):
    i = 0
    for j in range(len(s) - 2):
        c = s[j]
        if c == ":" and s[j+1] == "/" and s[j+2] == "/":
            if j >= 2: i = j + 3
            break
        if not (c.isalnum() or c in "+-._"): break
    host_end = i
    while host_end < len(s) and s[host_end] not in "/?#": host_end += 1
    at = s.rfind("@", i, host_end)
    if at >= 0: i = at + 1
    host = s[i:host_end]
    if ":" in host:
        host, _, port = host.partition(":")
        if not (2 <= len(port) <= 5 and port.isdigit() and port.isascii()): return False
    labels = host.split(".")
    if len(labels) < 2: return False
    for l in labels:
        if not l or not _host_char(l[0]) or not _host_char(l[-1]): return False
        if not all(_host_char(c) or c in "-_" for c in l): return False
    t = labels[-1]
    return len(t) >= 2 and all(("a" <= c <= "z") or ord(c) >= 0xA1 for c in t)
def infix_split(s):
    out = []; start = 0; i = 0; n = len(s)
    while i < n:
        c = s[i]; m = 0
        if c == "." and i + 1 < n and s[i+1] == ".":
            j = i
            while j < n and s[j] == ".": j += 1
            m = j - i
        elif c == "…" or isicon(c): m = 1
        elif i > 0 and i + 1 < n:
            p, q = s[i-1], s[i+1]
            if c in "+-*^" and p.isdigit() and (q.isdigit() or q == "-"): m = 1
            elif c == "." and (is_lower(p) or p in QUOTES) and (is_upper(q) or q in QUOTES): m = 1
            elif c == "," and p.isalpha() and q.isalpha(): m = 1
            elif c in HYPHENS and (p.isalpha() or p.isdigit()):
                if q.isalpha(): m = 1
                elif c == "-" and q == "-":
                    if i + 2 < n and s[i+2].isalpha(): m = 2
                    elif i + 3 < n and s[i+2] == "-" and s[i+3].isalpha(): m = 3
                elif c == "—" and q == "—" and i + 2 < n and s[i+2].isalpha(): m = 2
            elif c in ":<>=/" and (p.isalpha() or p.isdigit()) and q.isalpha(): m = 1
        if m:
            if i > start: out.append(s[start:i])
            out.append(s[i:i+m]); i += m; start = i
        else: i += 1
    if start < n: out.append(s[start:])
    return out
def tokenize_chunk(s):
    pre, suf = [], []
    last = -1
    while s and len(s) != last:
        if special(s): break
        last = len(s)
        pl = prefix_len(s)
        if pl:
            rest = s[pl:]
            if rest and special(rest): pre.append(s[:pl]); s = rest; break
        sl = suffix_len(s[pl:]) if len(s) > pl else 0
        if sl:
            rest = s[:-sl]
            if rest and special(rest): suf.append(s[-sl:]); s = rest; break
        if pl and sl and pl + sl <= len(s):
            pre.append(s[:pl]); suf.append(s[-sl:]); s = s[pl:-sl]
        elif pl:
            pre.append(s[:pl]); s = s[pl:]
        elif sl:
            suf.append(s[-sl:]); s = s[:-sl]
    mid = []
    if s:
        sp = special(s)
        if sp: mid = sp
        elif is_url(s): mid = [s]
        else: mid = infix_split(s)
    return pre + mid + suf[::-1]
def words(text, language="en"):
    out = []
    for chunk in text.split():
        out += tokenize_chunk(chunk)
    return out
